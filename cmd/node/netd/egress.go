package netd

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// EgressChain is the iptables chain (table nat) of the node's pod egress,
// jumped to from POSTROUTING. iptables, not nft: a host of the ssh
// platform is expected to have iptables (the CNI portmap plugin needs it),
// not nft.
const EgressChain = "KILN-POD-EGRESS"

// Egress is what the node's pods reach outside the cluster
// (networking.egress).
type Egress struct {
	// Mode is types.EgressNAT or types.EgressNone; empty is None (a
	// node of a cluster created before networking.egress existed).
	Mode string
	// ClusterNetworks are the pod networks, whose traffic is masqueraded.
	ClusterNetworks []netip.Prefix
	// ServiceNetwork is the Service network; it and the pod networks are
	// never masqueraded to.
	ServiceNetwork netip.Prefix
}

// EgressRules are the rules of EgressChain as `iptables -t nat -S` lists
// them: with NAT, pod traffic to any address outside the pod and Service
// networks is masqueraded to the node's address, so a server beside the
// node (on the LAN, or the local platform's host) answers the node, and
// traffic between pods keeps its addresses; with None, no chain at all.
func EgressRules(e Egress) ([]string, error) {
	switch e.Mode {
	case "", types.EgressNone:
		return nil, nil
	case types.EgressNAT:
	default:
		return nil, fmt.Errorf("egress %q: netd knows %s", e.Mode, strings.Join(types.Egresses(), ", "))
	}
	if len(e.ClusterNetworks) == 0 || !e.ServiceNetwork.IsValid() {
		return nil, fmt.Errorf("egress NAT needs the cluster and service networks")
	}
	var rules []string
	for _, p := range append(slices.Clone(e.ClusterNetworks), e.ServiceNetwork) {
		rules = append(rules, fmt.Sprintf("-A %s -d %s -j RETURN", EgressChain, p.Masked()))
	}
	for _, p := range e.ClusterNetworks {
		rules = append(rules, fmt.Sprintf("-A %s -s %s -j MASQUERADE", EgressChain, p.Masked()))
	}
	return rules, nil
}

// egressJump is the rule of POSTROUTING that enters EgressChain.
const egressJump = "-A POSTROUTING -j " + EgressChain

// EgressCommands are the iptables commands that turn the nat table listed
// in current (`iptables -t nat -S`) into one with e's NAT: nothing when it
// has it, else the chain created or flushed and filled, and the jump added
// last. A sealed node (None) has nothing to change: networking.egress is
// fixed at install, so no chain of a NAT past is there to remove.
func EgressCommands(e Egress, current string) ([][]string, error) {
	want, err := EgressRules(e)
	if err != nil {
		return nil, err
	}
	var have []string
	var chain, jump bool
	for _, l := range strings.Split(current, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "-N "+EgressChain:
			chain = true
		case l == egressJump:
			jump = true
		case strings.HasPrefix(l, "-A "+EgressChain+" "):
			have = append(have, l)
		}
	}
	ipt := func(args ...string) []string { return append([]string{"iptables", "-w", "-t", "nat"}, args...) }
	var cmds [][]string
	if want == nil || chain && jump && slices.Equal(have, want) {
		return nil, nil
	}
	if chain {
		cmds = append(cmds, ipt("-F", EgressChain))
	} else {
		cmds = append(cmds, ipt("-N", EgressChain))
	}
	for _, r := range want {
		cmds = append(cmds, ipt(strings.Fields(r)...))
	}
	if !jump {
		cmds = append(cmds, ipt("-A", "POSTROUTING", "-j", EgressChain))
	}
	return cmds, nil
}

// reconcileEgress gives the node cfg.Egress; a sealed node lists nothing.
func reconcileEgress(ctx context.Context, cfg Config) error {
	if cfg.Egress.Mode != types.EgressNAT {
		_, err := EgressRules(cfg.Egress)
		return err
	}
	out, err := cfg.Runner.Run(ctx, "iptables", "-w", "-t", "nat", "-S")
	if err != nil {
		return fmt.Errorf("iptables -t nat -S: %v: %s", err, strings.TrimSpace(string(out)))
	}
	cmds, err := EgressCommands(cfg.Egress, string(out))
	if err != nil {
		return err
	}
	for _, c := range cmds {
		if err := run(ctx, cfg, c); err != nil {
			return err
		}
	}
	return nil
}
