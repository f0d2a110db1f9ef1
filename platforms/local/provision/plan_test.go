package provision

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/platforms"
)

func planConfig(masters, workers int64) *types.Config {
	return &types.Config{
		Metadata:     types.Metadata{Name: "demo"},
		BaseDomain:   "example.com",
		ControlPlane: &types.MachinePool{Name: "master", Replicas: &masters, Platform: types.MachinePoolPlatform{Local: &local.MachinePool{CPUs: 1.5, MemoryMiB: 2048}}},
		Compute:      []types.MachinePool{{Name: "worker", Replicas: &workers}},
		Networking:   &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.0.0/24"}}, ServiceNetwork: []string{"172.30.0.0/16"}},
		Platform:     types.Platform{Local: &local.Platform{APIVIP: "10.66.0.1", DefaultMachinePlatform: &local.MachinePool{MemoryMiB: 1024}}},
	}
}

// newPlan lays out c's machines as created: numbered from 0.
func newPlan(c *types.Config) (*Plan, error) {
	return NewPlan(c, machineNet(c), "demo-x7k2p", machines.DefaultShape("demo-x7k2p", c.MasterReplicas(), c.WorkerReplicas()))
}

// machineNet is c's machine network, as types.Config.Resolve gives it to
// the provisioner.
func machineNet(c *types.Config) netip.Prefix {
	return netip.MustParsePrefix(c.Networking.MachineNetwork[0].CIDR).Masked()
}

// TestPlanByName checks that a machine's address follows its name's
// index, whatever machines come before it, and that names of another
// cluster or role, or a master index that would reach the workers'
// addresses, are refused.
func TestPlanByName(t *testing.T) {
	shape := machines.Shape{Masters: []string{"demo-x7k2p-master-0", "demo-x7k2p-master-3"}, Workers: []string{"demo-x7k2p-worker-2"}}
	p, err := NewPlan(planConfig(1, 1), machineNet(planConfig(1, 1)), "demo-x7k2p", shape)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(addrStrings(p.Masters), addrStrings(p.Workers)...), ","); got != "10.66.0.11,10.66.0.14,10.66.0.22" {
		t.Errorf("addresses = %s", got)
	}
	v := p.Vars(&platforms.Cluster{Config: planConfig(1, 1), InfraID: "demo-x7k2p"}, "/img", "/kiln")
	if !reflect.DeepEqual(v.MasterNames, shape.Masters) || !reflect.DeepEqual(v.WorkerNames, shape.Workers) {
		t.Errorf("names = %q, %q", v.MasterNames, v.WorkerNames)
	}
	for _, bad := range []machines.Shape{
		{Masters: []string{"other-abcde-master-0"}},
		{Masters: []string{"demo-x7k2p-worker-0"}},
		{Masters: []string{"demo-x7k2p-master-9"}},
		{Workers: []string{"demo-x7k2p-worker-x"}},
	} {
		if _, err := NewPlan(planConfig(1, 1), machineNet(planConfig(1, 1)), "demo-x7k2p", bad); err == nil {
			t.Errorf("NewPlan(%v) succeeded", bad)
		}
	}
}

func TestPlan(t *testing.T) {
	p, err := newPlan(planConfig(3, 2))
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
	if !v.BootstrapInLB || len(v.MasterNames) != 3 || v.WorkerNames[1] != "demo-x7k2p-worker-1" || v.BootstrapIgnition != "{}" {
		t.Errorf("vars = %+v", v)
	}
	if !reflect.DeepEqual(v.ServiceNetwork, []string{"172.30.0.0/16"}) {
		t.Errorf("service network (routed in every machine) = %q", v.ServiceNetwork)
	}
	small := planConfig(1, 0)
	small.Networking.MachineNetwork[0].CIDR = "10.66.0.0/29"
	if _, err := newPlan(small); err == nil {
		t.Error("a /29 has no room for the bootstrap machine at offset 10")
	}
}

// TestPlanServiceLB checks the LoadBalancer Service pool: the top quarter
// of the machine network, refused when a machine or the VIP falls in it,
// absent when the add-on is off.
func TestPlanServiceLB(t *testing.T) {
	p, err := newPlan(planConfig(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	if p.ServiceLB.String() != "10.66.0.192-10.66.0.254" {
		t.Errorf("pool = %s, want 10.66.0.192-10.66.0.254", p.ServiceLB)
	}
	small := planConfig(1, 1)
	small.Networking.MachineNetwork[0].CIDR = "10.66.0.0/27" // pool .24-.30, the worker at .20
	if p, err := newPlan(small); err != nil || p.ServiceLB.String() != "10.66.0.24-10.66.0.30" {
		t.Errorf("a /27 with one worker: pool %v, %v", p, err)
	}
	crowded := planConfig(1, 5) // workers .20-.24
	crowded.Networking.MachineNetwork[0].CIDR = "10.66.0.0/27"
	if _, err := newPlan(crowded); err == nil || !strings.Contains(err.Error(), "10.66.0.24") {
		t.Errorf("worker 10.66.0.24 in the pool: err = %v", err)
	}
	off := false
	crowded.Platform.Local.Addons = &local.Addons{LoadBalancer: &off}
	if p, err := newPlan(crowded); err != nil || p.ServiceLB.Size() != 0 {
		t.Errorf("add-on off: pool %+v, %v; want none and no error", p, err)
	}
	vip := planConfig(1, 1)
	vip.Platform.Local.APIVIP = "10.66.0.200"
	if _, err := newPlan(vip); err == nil {
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

// TestMemoryToStart: preflight counts the memory of the machines a create
// still starts - each with its pool's limit - not of those that run, nor
// the bootstrap machine once bootstrap is complete.
func TestMemoryToStart(t *testing.T) {
	c := &platforms.Cluster{Config: planConfig(3, 2), InfraID: "demo-x7k2p"}
	const master, worker = 2048 << 20, 1024 << 20
	if got, want := memoryToStart(c, nil), []int64{master, master, master, master, worker, worker}; !reflect.DeepEqual(got, want) {
		t.Errorf("fresh cluster: %v, want %v", got, want)
	}
	c.BootstrapDone = true
	running := []string{"demo-x7k2p-master-0", "demo-x7k2p-worker-1"}
	if got, want := memoryToStart(c, running), []int64{master, master, worker}; !reflect.DeepEqual(got, want) {
		t.Errorf("resumed after bootstrap: %v, want %v", got, want)
	}
}
