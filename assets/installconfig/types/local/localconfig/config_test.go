package localconfig

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

func TestParseRoutes(t *testing.T) {
	const table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"wg0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n"
	got, err := parseRoutes(bufio.NewScanner(strings.NewReader(table)))
	if err != nil {
		t.Fatal(err)
	}
	want := []HostNetwork{
		{netip.MustParsePrefix("0.0.0.0/0"), "eth0"},
		{netip.MustParsePrefix("192.0.2.0/24"), "eth0"},
		{netip.MustParsePrefix("10.0.0.0/8"), "wg0"},
	}
	if len(got) != len(want) {
		t.Fatalf("routes = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("route %d = %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := parseRoutes(bufio.NewScanner(strings.NewReader("h\nx zz 0 0 0 0 0 zz\n"))); err == nil {
		t.Error("a garbled table parsed")
	}
}

func TestDefaultsAndHostOverlap(t *testing.T) {
	c := &types.Config{Networking: &types.Networking{}, Platform: types.Platform{Local: &local.Platform{}}}
	cfg := &Config{HostNetworks: func() ([]HostNetwork, error) {
		return []HostNetwork{{netip.MustParsePrefix("0.0.0.0/0"), "eth0"}, {netip.MustParsePrefix("10.0.0.0/8"), "wg0"}}, nil
	}}
	cfg.SetDefaults(c)
	if c.Networking.MachineNetwork[0].CIDR != DefaultMachineNetwork || c.Platform.Local.APIVIP != "10.66.0.1" {
		t.Fatalf("defaults = %+v %+v", c.Networking, c.Platform.Local)
	}
	errs := cfg.Validate(c, field.NewPath("platform", "local"))
	if len(errs) != 1 || errs[0].Field != "networking.machineNetwork[0].cidr" || !strings.Contains(errs[0].Detail, "wg0") {
		t.Errorf("errors = %v, want the overlap with wg0's 10.0.0.0/8", errs)
	}
}

// A host that already runs a cluster on 10.66.0.0/24 gets 10.66.1.0/24 for
// the next one; an explicit machine network is kept.
func TestDefaultMachineNetworkSkipsUsedBlocks(t *testing.T) {
	cfg := &Config{HostNetworks: func() ([]HostNetwork, error) {
		return []HostNetwork{{netip.MustParsePrefix("0.0.0.0/0"), "eth0"}, {netip.MustParsePrefix("10.66.0.0/24"), "kiln-ab12c"}}, nil
	}}
	c := &types.Config{Networking: &types.Networking{}, Platform: types.Platform{Local: &local.Platform{}}}
	cfg.SetDefaults(c)
	if got := c.Networking.MachineNetwork[0].CIDR; got != "10.66.1.0/24" || c.Platform.Local.APIVIP != "10.66.1.1" {
		t.Fatalf("machine network = %s, VIP %s; want the next free /24", got, c.Platform.Local.APIVIP)
	}
	if errs := cfg.Validate(c, field.NewPath("platform", "local")); len(errs) != 0 {
		t.Fatalf("the chosen default does not validate: %v", errs)
	}
	set := &types.Config{Networking: &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.0.0/24"}}}, Platform: types.Platform{Local: &local.Platform{}}}
	cfg.SetDefaults(set)
	if set.Networking.MachineNetwork[0].CIDR != "10.66.0.0/24" {
		t.Fatal("an explicit machine network was replaced")
	}
}

func TestReadHostNetworksOnThisHost(t *testing.T) {
	nets, err := ReadHostNetworks()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		if n.Prefix.Addr().IsLoopback() {
			return
		}
	}
	t.Errorf("no loopback block among %v", nets)
}
