package installconfig

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
)

// TestMachines checks the names and addresses kiln publishes in the
// machine inventory: the local platform's plan, and nothing on none.
func TestMachines(t *testing.T) {
	two, one := int64(2), int64(1)
	c := &types.Config{
		ControlPlane: &types.MachinePool{Replicas: &one},
		Compute:      []types.MachinePool{{Replicas: &two}},
		Networking:   &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.3.0/24"}}},
		Platform:     types.Platform{Local: &local.Platform{APIVIP: "10.66.3.1"}},
	}
	r := types.Resolved{MachineNetwork: netip.MustParsePrefix("10.66.3.0/24")}
	masters, workers := MachineNames(c, "demo-x7k2p")
	if !slices.Equal(masters, []string{"demo-x7k2p-master-0"}) || !slices.Equal(workers, []string{"demo-x7k2p-worker-0", "demo-x7k2p-worker-1"}) {
		t.Fatalf("MachineNames = %q, %q", masters, workers)
	}
	for name, want := range map[string]string{"demo-x7k2p-master-0": "10.66.3.11", "demo-x7k2p-worker-1": "10.66.3.21"} {
		got, ok, err := MachineAddresses(c, r, "demo-x7k2p", name)
		if err != nil || !ok || !slices.Equal(got, []netip.Addr{netip.MustParseAddr(want)}) {
			t.Errorf("MachineAddresses(%s) = %v, %v, %v; want [%s]", name, got, ok, err, want)
		}
	}
	if _, ok, err := MachineAddresses(c, r, "demo-x7k2p", "other-abcde-worker-0"); err == nil || ok {
		t.Errorf("MachineAddresses of another cluster's machine: ok %v, err %v; want an error", ok, err)
	}
	upi := &types.Config{Platform: types.Platform{None: &none.Platform{}}}
	if got, ok, err := MachineAddresses(upi, types.Resolved{}, "upi-abcde", "upi-abcde-master-0"); got != nil || ok || err != nil {
		t.Errorf("MachineAddresses on none = %v, %v, %v; want nothing: the user's machines have their own addresses", got, ok, err)
	}
}
