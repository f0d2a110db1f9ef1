package machineset

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/installconfigtest"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/graph/installdir"
)

// TestEffectiveConfig checks that the hosts a scale recorded replace the
// install-config's, with replica counts to match, that the state's
// config is left as it was, and that the result validates.
func TestEffectiveConfig(t *testing.T) {
	c := installconfigtest.SSHExample(t)
	dir := t.TempDir()
	if got, err := EffectiveConfig(dir, c); err != nil || got != c {
		t.Fatalf("without a record: %p, %v; want the config itself", got, err)
	}
	hosts := []ssh.Host{c.Platform.SSH.Hosts[0], c.Platform.SSH.Hosts[1],
		{Name: "node6", Address: "192.168.10.16", Role: ssh.RoleWorker}, {Name: "node7", Address: "192.168.10.17", Role: ssh.RoleWorker}}
	if err := SaveHosts(dir, hosts); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, installdir.Hosts)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the hosts record: %v, %v; want mode 0600", st, err)
	}
	got, err := EffectiveConfig(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Platform.SSH.Hosts, hosts) || got.MasterReplicas() != 1 || got.WorkerReplicas() != 2 {
		t.Errorf("effective hosts %+v, %d masters, %d workers; want the record's, 1 and 2", got.Platform.SSH.Hosts, got.MasterReplicas(), got.WorkerReplicas())
	}
	if len(c.Platform.SSH.Hosts) != 5 || c.MasterReplicas() != 3 || c.WorkerReplicas() != 1 {
		t.Errorf("the state's config changed: %+v", c.Platform.SSH.Hosts)
	}
	// As `kiln show install-config` prints it, for the next scale.
	out, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := installconfig.ParseDefaulted(out); err != nil {
		t.Errorf("the effective config does not validate: %v", err)
	}
}
