package netd

import (
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

func testEgress(mode string) Egress {
	return Egress{Mode: mode, ClusterNetworks: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/14")},
		ServiceNetwork: netip.MustParsePrefix("172.30.0.0/16")}
}

// joinCmds writes commands one a line.
func joinCmds(cmds [][]string) string {
	var lines []string
	for _, c := range cmds {
		lines = append(lines, strings.Join(c, " "))
	}
	return strings.Join(lines, "\n")
}

// EgressCommands converges the nat table on the wanted chain from any
// start: none, a stale chain, the right one, and back to None.
func TestEgressCommands(t *testing.T) {
	base := "-P PREROUTING ACCEPT\n-P POSTROUTING ACCEPT\n-N KUBE-POSTROUTING\n-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n"
	nat := "-N KILN-POD-EGRESS\n-A POSTROUTING -j KILN-POD-EGRESS\n" +
		"-A KILN-POD-EGRESS -d 10.128.0.0/14 -j RETURN\n-A KILN-POD-EGRESS -d 172.30.0.0/16 -j RETURN\n-A KILN-POD-EGRESS -s 10.128.0.0/14 -j MASQUERADE\n"
	stale := "-N KILN-POD-EGRESS\n-A KILN-POD-EGRESS -s 10.0.0.0/8 -j MASQUERADE\n"
	tests := []struct {
		name, mode, current, want string
	}{
		{"NAT from nothing", types.EgressNAT, base, `iptables -w -t nat -N KILN-POD-EGRESS
iptables -w -t nat -A KILN-POD-EGRESS -d 10.128.0.0/14 -j RETURN
iptables -w -t nat -A KILN-POD-EGRESS -d 172.30.0.0/16 -j RETURN
iptables -w -t nat -A KILN-POD-EGRESS -s 10.128.0.0/14 -j MASQUERADE
iptables -w -t nat -A POSTROUTING -j KILN-POD-EGRESS`},
		{"NAT in place", types.EgressNAT, base + nat, ""},
		{"NAT over a stale chain", types.EgressNAT, base + stale, `iptables -w -t nat -F KILN-POD-EGRESS
iptables -w -t nat -A KILN-POD-EGRESS -d 10.128.0.0/14 -j RETURN
iptables -w -t nat -A KILN-POD-EGRESS -d 172.30.0.0/16 -j RETURN
iptables -w -t nat -A KILN-POD-EGRESS -s 10.128.0.0/14 -j MASQUERADE
iptables -w -t nat -A POSTROUTING -j KILN-POD-EGRESS`},
		{"None, nothing to do", types.EgressNone, base, ""},
		{"unset is None", "", base, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmds, err := EgressCommands(testEgress(tt.mode), tt.current)
			if err != nil {
				t.Fatal(err)
			}
			if got := joinCmds(cmds); got != tt.want {
				t.Errorf("commands =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	for _, bad := range []Egress{{Mode: "Open"}, {Mode: types.EgressNAT}} {
		if _, err := EgressCommands(bad, base); err == nil {
			t.Errorf("EgressCommands(%+v) succeeded", bad)
		}
	}
}

// The real iptables, in a network namespace of the test's own, ends with
// the chain as EgressRules lists it, and a second pass has nothing to do.
func TestEgressCommandsOnIptables(t *testing.T) {
	if _, err := exec.LookPath("iptables"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs iptables and root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
	// One shell in a new network namespace applies the commands (from
	// its arguments, one a line) and lists the table.
	apply := func(cmds [][]string, list bool) string {
		script := joinCmds(cmds)
		if list {
			script += "\niptables -w -t nat -S"
		}
		out, err := exec.Command("unshare", "-n", "sh", "-ec", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return string(out)
	}
	cmds, err := EgressCommands(testEgress(types.EgressNAT), apply(nil, true))
	if err != nil {
		t.Fatal(err)
	}
	listed := apply(cmds, true)
	again, err := EgressCommands(testEgress(types.EgressNAT), listed)
	if err != nil || len(again) != 0 {
		t.Errorf("second pass = %q, %v; want nothing to do after\n%s", joinCmds(again), err, listed)
	}
}
