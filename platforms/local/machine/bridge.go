package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ipLink is the part of `ip -json -details addr show` output kiln reads.
type ipLink struct {
	IfName   string `json:"ifname"`
	LinkInfo *struct {
		InfoKind string `json:"info_kind"`
	} `json:"linkinfo"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// findLink lists the host's links and returns the one named name.
func findLink(ctx context.Context, r Runner, name string) (*ipLink, error) {
	out, err := r.Run(ctx, "ip", "-json", "-details", "addr", "show")
	if err != nil {
		return nil, err
	}
	var links []ipLink
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("parsing ip addr output: %w", err)
	}
	for i := range links {
		if links[i].IfName == name {
			return &links[i], nil
		}
	}
	return nil, nil
}

// HoldRouteMetric is the metric of the unreachable route EnsureBridge
// holds for the bridge's network. The bridge's own route (metric 0) wins
// while the bridge is there; once it is gone (deleted, or down), packets to
// the network meet the unreachable route, and fail on this host instead of
// leaving through its default route: a socket of a killed load balancer
// still retransmitting to a dead machine, or any dial of the host's
// (docs/security.md, "Addresses kiln dials").
const HoldRouteMetric = 9999

// holdRouteArgv adds ("replace") or removes ("del") the unreachable route
// of network.
func holdRouteArgv(verb string, network netip.Prefix) []string {
	return []string{"ip", "route", verb, "unreachable", network.String(), "metric", strconv.Itoa(HoldRouteMetric)}
}

// EnsureBridge creates the host bridge name with the host's address on it
// (gatewayCIDR, e.g. "10.66.0.1/24"), brings it up and holds its network
// with an unreachable route (HoldRouteMetric). It is idempotent; an
// existing interface of that name that is not a bridge is an error. No
// route or NAT beyond the host is set up: machines reach each other and the
// host only.
func EnsureBridge(ctx context.Context, r Runner, name, gatewayCIDR string) error {
	pfx, err := netip.ParsePrefix(gatewayCIDR)
	if err != nil || !pfx.Addr().Is4() {
		return &InvalidError{fmt.Errorf("bridge address %q: must be an IPv4 address with prefix", gatewayCIDR)}
	}
	if !validIfName(name) {
		return &InvalidError{fmt.Errorf("bridge name %q: must be 1-15 characters", name)}
	}
	link, err := findLink(ctx, r, name)
	if err != nil {
		return err
	}
	var cmds [][]string
	if link == nil {
		cmds = append(cmds, bridgeAddArgv(name))
	} else if link.LinkInfo == nil || link.LinkInfo.InfoKind != "bridge" {
		return fmt.Errorf("interface %s exists and is not a bridge", name)
	}
	if !hasAddr(link, pfx) {
		cmds = append(cmds, []string{"ip", "addr", "add", pfx.String(), "dev", name})
	}
	cmds = append(cmds, []string{"ip", "link", "set", "dev", name, "up"}, holdRouteArgv("replace", pfx.Masked()))
	for _, c := range cmds {
		if err := runQuiet(ctx, r, c); err != nil {
			return fmt.Errorf("setting up bridge %s: %w", name, err)
		}
	}
	return nil
}

// validIfName reports whether name can be an interface name, and be
// quoted in an nftables ruleset: 1-15 characters, none of them a slash,
// blank, colon or double quote.
func validIfName(name string) bool {
	return name != "" && len(name) <= 15 && !strings.ContainsAny(name, "/ :\"\t\n")
}

// bridgeAddArgv creates a bridge. STP is off (a single bridge, no loops)
// so ports forward at once.
func bridgeAddArgv(name string) []string {
	return []string{"ip", "link", "add", "name", name, "type", "bridge", "stp_state", "0"}
}

func hasAddr(l *ipLink, pfx netip.Prefix) bool {
	if l == nil {
		return false
	}
	for _, a := range l.AddrInfo {
		if a.Family == "inet" && a.Local == pfx.Addr().String() && a.PrefixLen == pfx.Bits() {
			return true
		}
	}
	return false
}

// DeleteBridge deletes the host bridge name and the unreachable routes
// EnsureBridge held for its networks; an absent bridge is fine.
func DeleteBridge(ctx context.Context, r Runner, name string) error {
	link, err := findLink(ctx, r, name)
	if err != nil {
		return err
	}
	if link == nil {
		return nil
	}
	if link.LinkInfo == nil || link.LinkInfo.InfoKind != "bridge" {
		return fmt.Errorf("interface %s is not a bridge; not deleting it", name)
	}
	// The unreachable routes of its networks go first (one that is gone
	// already is fine): nothing of kiln's stays in the routing table.
	for _, a := range link.AddrInfo {
		if a.Family != "inet" {
			continue
		}
		if pfx, err := netip.ParsePrefix(fmt.Sprintf("%s/%d", a.Local, a.PrefixLen)); err == nil {
			_ = runQuiet(ctx, r, holdRouteArgv("del", pfx.Masked()))
		}
	}
	if err := runQuiet(ctx, r, linkDeleteArgv(name)); err != nil {
		return fmt.Errorf("deleting bridge %s: %w", name, err)
	}
	return nil
}
