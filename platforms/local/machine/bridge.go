package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
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

// EnsureBridge creates the host bridge name with the host's address on it
// (gatewayCIDR, e.g. "10.66.0.1/24") and brings it up. It is idempotent;
// an existing interface of that name that is not a bridge is an error. No
// route or NAT beyond the host is set up: machines reach each other and the
// host only.
func EnsureBridge(ctx context.Context, r Runner, name, gatewayCIDR string) error {
	pfx, err := netip.ParsePrefix(gatewayCIDR)
	if err != nil || !pfx.Addr().Is4() {
		return &InvalidError{fmt.Errorf("bridge address %q: must be an IPv4 address with prefix", gatewayCIDR)}
	}
	if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ :") {
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
	cmds = append(cmds, []string{"ip", "link", "set", "dev", name, "up"})
	for _, c := range cmds {
		if err := runQuiet(ctx, r, c); err != nil {
			return fmt.Errorf("setting up bridge %s: %w", name, err)
		}
	}
	return nil
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

// DeleteBridge deletes the host bridge name; an absent bridge is fine.
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
	if err := runQuiet(ctx, r, linkDeleteArgv(name)); err != nil {
		return fmt.Errorf("deleting bridge %s: %w", name, err)
	}
	return nil
}
