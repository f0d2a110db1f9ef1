package localconfig

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

func addressConfig() *types.Config {
	return &types.Config{Platform: types.Platform{Local: &local.Platform{APIVIP: "10.66.0.1"}}}
}

// TestMachineAddress checks the address plan: it follows the name's index
// alone, and names of another cluster, master indexes that would reach the
// workers and addresses past the block are refused.
func TestMachineAddress(t *testing.T) {
	tests := []struct {
		cidr, name string
		role, addr string
		err        string // part of the error; "" for none
	}{
		{cidr: "10.66.0.0/24", name: "demo-x7k2p-master-0", role: "master", addr: "10.66.0.11"},
		{cidr: "10.66.0.0/24", name: "demo-x7k2p-master-8", role: "master", addr: "10.66.0.19"},
		{cidr: "10.66.0.0/24", name: "demo-x7k2p-worker-0", role: "worker", addr: "10.66.0.20"},
		{cidr: "10.66.0.0/24", name: "demo-x7k2p-worker-12", role: "worker", addr: "10.66.0.32"},
		{cidr: "10.66.0.0/24", name: "demo-x7k2p-master-9", err: "at most 9 master indexes"},
		{cidr: "10.66.0.0/24", name: "other-abcde-worker-0", err: "not a master or worker of demo-x7k2p"},
		{cidr: "10.66.0.0/24", name: "demo-x7k2p-bootstrap", err: "not a master or worker"},
		{cidr: "10.66.0.0/27", name: "demo-x7k2p-worker-11", err: "no room for address offset 31"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" in "+tt.cidr, func(t *testing.T) {
			cidr := netip.MustParsePrefix(tt.cidr)
			got, err := (&Config{}).MachineAddresses(addressConfig(), types.Resolved{MachineNetwork: cidr}, "demo-x7k2p", tt.name)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if want := []netip.Addr{netip.MustParseAddr(tt.addr)}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("MachineAddresses = %v, %v; want %v", got, err, want)
			}
			if role, addr, err := MachineAddress(cidr, "demo-x7k2p", tt.name); err != nil || role != tt.role || addr != got[0] {
				t.Fatalf("MachineAddress = %s %s %v, want %s %s", role, addr, err, tt.role, tt.addr)
			}
		})
	}
	if a, err := BootstrapAddress(netip.MustParsePrefix("10.66.0.0/24")); err != nil || a != netip.MustParseAddr("10.66.0.10") {
		t.Errorf("BootstrapAddress = %s, %v; want 10.66.0.10", a, err)
	}
	if _, err := (&Config{}).MachineAddresses(addressConfig(), types.Resolved{}, "demo-x7k2p", "demo-x7k2p-worker-0"); err == nil {
		t.Error("MachineAddresses without a machine network succeeded")
	}
}
