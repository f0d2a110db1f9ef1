package provision

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/lb"
)

// exampleCluster is the cluster of docs/examples/install-config-ssh.yaml.
func exampleCluster(t *testing.T) *platforms.Cluster {
	t.Helper()
	data, err := os.ReadFile("../../../docs/examples/install-config-ssh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := installconfig.ParseDefaulted(data)
	if err != nil {
		t.Fatal(err)
	}
	return &platforms.Cluster{Config: cfg, InfraID: "rack-x1y2z", Bootstrap: []byte("b"), Master: []byte("m"), Worker: []byte("w")}
}

func names(hs []tfdata.SSHHost) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name+"@"+h.Address)
	}
	return out
}

func TestVars(t *testing.T) {
	c := exampleCluster(t)
	v, err := Vars(c, "/cache/kiln-v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Bootstrap == nil || v.Bootstrap.Name != "node1" || v.Bootstrap.IP != "192.168.10.11" {
		t.Errorf("bootstrap %+v", v.Bootstrap)
	}
	if got := names(v.Masters); !slices.Equal(got, []string{"node2@192.168.10.12", "node3@192.168.10.13", "node4@192.168.10.14"}) {
		t.Errorf("masters %q", got)
	}
	if got := names(v.Workers); !slices.Equal(got, []string{"node5@192.168.10.15"}) {
		t.Errorf("workers %q", got)
	}
	if v.SSHUser != "root" || *v.SSHPort != 22 || v.SSHIdentityFile == nil || *v.SSHIdentityFile != "/root/.ssh/id_ed25519" ||
		v.SSHBastion != nil || v.Payload != "/cache/kiln-v1" || v.BootstrapIgnition != "b" || v.MasterIgnition != "m" || v.WorkerIgnition != "w" {
		t.Errorf("vars %+v", v)
	}
	home, _ := os.UserHomeDir()
	if v.SSHKnownHostsFile != home+"/.ssh/known_hosts" {
		t.Errorf("known hosts %q, want the user's own", v.SSHKnownHostsFile)
	}
	// Workers held back: the masters alone. After bootstrap-complete: no
	// bootstrap host.
	c.Shape = machines.Shape{Masters: c.Machines().Masters}
	c.BootstrapDone = true
	v, err = Vars(c, "/cache/kiln-v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Bootstrap != nil || len(v.Masters) != 3 || len(v.Workers) != 0 {
		t.Errorf("masters only, bootstrap done: %+v", v)
	}
}

func TestAPIProxyConfig(t *testing.T) {
	c := exampleCluster(t)
	data, err := APIProxyConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg lb.Config
	if err := json.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || cfg.Listen != "127.0.0.1" || len(cfg.Services) != 2 {
		t.Fatalf("proxy config %+v (%v)", cfg, err)
	}
	api, mcs := cfg.Services[0], cfg.Services[1]
	if api.Port != 6444 || api.Health != lb.CheckHTTPS || api.HealthPath != "/readyz" ||
		!slices.Equal(api.Backends, []string{"192.168.10.11:6443", "192.168.10.12:6443", "192.168.10.13:6443", "192.168.10.14:6443"}) {
		t.Errorf("api %+v", api)
	}
	if mcs.Port != 22624 || mcs.Health != lb.CheckTCP ||
		!slices.Equal(mcs.Backends, []string{"192.168.10.11:22623", "192.168.10.12:22623", "192.168.10.13:22623", "192.168.10.14:22623"}) {
		t.Errorf("machine-config %+v", mcs)
	}
}
