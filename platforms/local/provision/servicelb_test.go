package provision

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
)

// TestSetServiceLB: the cluster stage's LoadBalancer Service controller
// gets the plan's pool and the admin kubeconfig of --dir (read once: vars
// that have one keep it; a link is refused); with the add-on off it gets
// neither, and the stage has no controller.
func TestSetServiceLB(t *testing.T) {
	shape := machines.Shape{Masters: []string{"demo-x7k2p-master-0", "demo-x7k2p-master-3"}, Workers: []string{"demo-x7k2p-worker-2"}}
	plan, err := NewPlan(planConfig(1, 1), machineNet(planConfig(1, 1)), "demo-x7k2p", shape)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "auth"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, installdir.AdminKubeconfig), []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Provisioner{}
	c := &platforms.Cluster{Dir: dir, InfraID: "demo-x7k2p", Config: planConfig(1, 1)}
	v := plan.Vars(c, "/images/node", "/usr/local/bin/kiln")
	if err := p.setServiceLB(c, plan, &v); err != nil {
		t.Fatal(err)
	}
	want := tfdata.AddressRange{First: "10.66.0.192", Last: "10.66.0.254"}
	if v.ServiceLBPool == nil || *v.ServiceLBPool != want || v.ServiceLBKubeconfig != "apiVersion: v1\n" {
		t.Errorf("pool %+v, kubeconfig %q; want %+v and the admin kubeconfig", v.ServiceLBPool, v.ServiceLBKubeconfig, want)
	}
	v.ServiceLBKubeconfig = "as applied"
	if err := p.setServiceLB(c, plan, &v); err != nil || v.ServiceLBKubeconfig != "as applied" {
		t.Errorf("vars with a kubeconfig: %q, %v; want it kept", v.ServiceLBKubeconfig, err)
	}

	// A link in --dir is refused: the controller acts with these credentials.
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "auth"), filepath.Join(linked, "auth")); err != nil {
		t.Fatal(err)
	}
	c.Dir, v.ServiceLBKubeconfig = linked, ""
	if err := p.setServiceLB(c, plan, &v); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Errorf("kubeconfig through a link: %v, want atomicfile.ErrSymlink", err)
	}

	off := false
	c.Config.Platform.Local.Addons = &local.Addons{LoadBalancer: &off}
	if plan, err = NewPlan(c.Config, machineNet(c.Config), c.InfraID, shape); err != nil {
		t.Fatal(err)
	}
	v.ServiceLBKubeconfig = "left"
	if err := p.setServiceLB(c, plan, &v); err != nil || v.ServiceLBPool != nil || v.ServiceLBKubeconfig != "" {
		t.Errorf("add-on off: pool %+v, kubeconfig %q, %v; want neither", v.ServiceLBPool, v.ServiceLBKubeconfig, err)
	}
}
