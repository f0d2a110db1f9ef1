package provision

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/platforms"
)

func planConfig(masters, workers int64) *types.Config {
	return &types.Config{
		Metadata:     types.Metadata{Name: "demo"},
		BaseDomain:   "example.com",
		ControlPlane: &types.MachinePool{Name: "master", Replicas: &masters, Platform: types.MachinePoolPlatform{Local: &types.LocalMachinePool{CPUs: 1.5, MemoryMiB: 2048}}},
		Compute:      []types.MachinePool{{Name: "worker", Replicas: &workers}},
		Networking:   &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.0.0/24"}}, ServiceNetwork: []string{"172.30.0.0/16"}},
		Platform:     types.Platform{Local: &types.LocalPlatform{APIVIP: "10.66.0.1", DefaultMachinePlatform: &types.LocalMachinePool{MemoryMiB: 1024}}},
	}
}

func TestPlan(t *testing.T) {
	p, err := NewPlan(planConfig(3, 2), "demo-x7k2p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Bridge != "kiln-x7k2p" || p.VIP.String() != "10.66.0.1" || p.Bootstrap.String() != "10.66.0.10" {
		t.Fatalf("plan = %+v", p)
	}
	if got := strings.Join(addrStrings(p.Masters), ","); got != "10.66.0.11,10.66.0.12,10.66.0.13" {
		t.Errorf("masters = %s", got)
	}
	if got := strings.Join(addrStrings(p.Workers), ","); got != "10.66.0.20,10.66.0.21" {
		t.Errorf("workers = %s", got)
	}
	v := p.Vars(&platforms.Cluster{Config: planConfig(3, 2), InfraID: "demo-x7k2p", Bootstrap: []byte("{}")}, "/img", "/kiln")
	if v.MasterCPUs != 1.5 || v.MasterMemoryMiB != 2048 || v.BootstrapMemoryMiB != 2048 || v.WorkerMemoryMiB != 1024 {
		t.Errorf("sizes: pool settings and platform defaults not applied: %+v", v)
	}
	if !v.BootstrapInLB || v.MasterCount != 3 || v.WorkerCount != 2 || v.BootstrapIgnition != "{}" {
		t.Errorf("vars = %+v", v)
	}
	if !reflect.DeepEqual(v.ServiceNetwork, []string{"172.30.0.0/16"}) {
		t.Errorf("service network (routed in every machine) = %q", v.ServiceNetwork)
	}
	small := planConfig(1, 0)
	small.Networking.MachineNetwork[0].CIDR = "10.66.0.0/29"
	if _, err := NewPlan(small, "demo-x7k2p"); err == nil {
		t.Error("a /29 has no room for the bootstrap machine at offset 10")
	}
}

// TestPlanServiceLB checks the LoadBalancer Service pool: the top quarter
// of the machine network, refused when a machine or the VIP falls in it,
// absent when the add-on is off.
func TestPlanServiceLB(t *testing.T) {
	p, err := NewPlan(planConfig(3, 2), "demo-x7k2p")
	if err != nil {
		t.Fatal(err)
	}
	if p.ServiceLB.String() != "10.66.0.192-10.66.0.254" {
		t.Errorf("pool = %s, want 10.66.0.192-10.66.0.254", p.ServiceLB)
	}
	small := planConfig(1, 1)
	small.Networking.MachineNetwork[0].CIDR = "10.66.0.0/27" // pool .24-.30, the worker at .20
	if p, err := NewPlan(small, "demo-x7k2p"); err != nil || p.ServiceLB.String() != "10.66.0.24-10.66.0.30" {
		t.Errorf("a /27 with one worker: pool %v, %v", p, err)
	}
	crowded := planConfig(1, 5) // workers .20-.24
	crowded.Networking.MachineNetwork[0].CIDR = "10.66.0.0/27"
	if _, err := NewPlan(crowded, "demo-x7k2p"); err == nil || !strings.Contains(err.Error(), "10.66.0.24") {
		t.Errorf("worker 10.66.0.24 in the pool: err = %v", err)
	}
	off := false
	crowded.Platform.Local.Addons = &types.LocalAddons{LoadBalancer: &off}
	if p, err := NewPlan(crowded, "demo-x7k2p"); err != nil || p.ServiceLB.Size() != 0 {
		t.Errorf("add-on off: pool %+v, %v; want none and no error", p, err)
	}
	vip := planConfig(1, 1)
	vip.Platform.Local.APIVIP = "10.66.0.200"
	if _, err := NewPlan(vip, "demo-x7k2p"); err == nil {
		t.Error("an API VIP in the pool was accepted")
	}
}

func TestBridgeName(t *testing.T) {
	for infra, want := range map[string]string{"demo-x7k2p": "kiln-x7k2p", "abc": "kiln-abc", "a-b-0123456789abc": "kiln-0123456789"} {
		if got := BridgeName(infra); got != want || len(got) > 15 {
			t.Errorf("BridgeName(%q) = %q, want %q", infra, got, want)
		}
	}
}
