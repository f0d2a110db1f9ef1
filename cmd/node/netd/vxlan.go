package netd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// KilnVXLAN: each node has one VXLAN device, VXLANDevice, whose MAC address
// follows from the node's InternalIP (VTEPMAC) and whose address is the
// network address of the node's pod CIDR (VTEPAddr). For every other node,
// netd keeps a forwarding entry (its MAC is behind its InternalIP), a
// neighbour (its VTEP address has its MAC) and a route of its pod CIDR via
// its VTEP address on the device. All of it follows from Node objects: no
// annotation, lease or second agent (docs/pod-network.md).
const (
	// VXLANDevice is the tunnel device netd creates and owns.
	VXLANDevice = "kiln.vxlan"
	// VXLANID is the overlay's VXLAN network identifier.
	VXLANID = 1
	// VXLANPort is the tunnels' UDP port, IANA's (the kernel's default is 8472).
	VXLANPort = 4789
	// VXLANOverhead is what the tunnel adds to a pod's packet: outer IPv4
	// (20 bytes), UDP (8) and VXLAN (8) headers and the inner Ethernet
	// header (14).
	VXLANOverhead = 50
	// defaultUnderlayMTU is assumed when the node address's device reports
	// no MTU.
	defaultUnderlayMTU = 1500
)

// VTEPMAC is the MAC address of the VXLAN device of the node at ip: 0a:58
// (locally administered, unicast) and ip's four bytes, so every node knows
// every peer's from its InternalIP.
func VTEPMAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// VTEPAddr is the address of the VXLAN device of the node with pod CIDR c:
// its network address, which host-local never gives a pod and the bridge's
// gateway (the first address) leaves free. Traffic the node itself sends
// through the tunnel has it as source, so replies come back through the
// tunnel too.
func VTEPAddr(c netip.Prefix) netip.Addr { return c.Masked().Addr() }

// reconcileVXLAN makes the VXLAN device and the entries to every peer match
// nodes; it returns the pods' MTU.
func reconcileVXLAN(ctx context.Context, cfg Config, nodes []*corev1.Node) (int, error) {
	local, own := cfg.NodeIP, netip.Prefix{}
	if n := selfNode(cfg.NodeName, nodes); n != nil {
		if !local.IsValid() {
			local = internalIP(n)
		}
		if cidrs := podCIDRs(n); len(cidrs) > 0 {
			own = cidrs[0]
		}
	}
	if !local.IsValid() {
		return 0, fmt.Errorf("%s: no node address to tunnel from (--node-ip, or the Node's InternalIP)", VXLANDevice)
	}
	mtu, err := ensureVXLANDevice(ctx, cfg, local, own)
	if err != nil {
		return 0, err
	}
	sets, err := vxlanSets(ctx, cfg, peers(cfg.NodeName, nodes))
	if err != nil {
		return 0, err
	}
	return mtu, syncSets(ctx, cfg, sets...)
}

// vxlanSets pairs the forwarding entries, neighbours and routes the peers
// need with those the node has, in the order they are installed.
func vxlanSets(ctx context.Context, cfg Config, ps []peer) ([]entrySet, error) {
	var fdb, neigh entrySet
	var routes []Route
	for _, p := range ps {
		mac, vtep := VTEPMAC(p.ip), VTEPAddr(p.cidrs[0])
		fdb.want = append(fdb.want, fdbEntry(mac, p.ip.String()))
		neigh.want = append(neigh.want, neighEntry(vtep.String(), mac))
		for _, c := range p.cidrs {
			routes = append(routes, Route{Dst: c, Via: vtep, Dev: VXLANDevice})
		}
	}
	sortRoutes(routes)
	var fdbs []struct {
		MAC   string `json:"mac"`
		Dst   string `json:"dst"`
		State string `json:"state"`
	}
	if err := listJSON(ctx, cfg.Runner, &fdbs, "bridge", "-j", "fdb", "show", "dev", VXLANDevice); err != nil {
		return nil, err
	}
	for _, f := range fdbs {
		if f.Dst == "" {
			continue // the kernel's own entries; netd's all have a remote
		}
		e := fdbEntry(f.MAC, f.Dst)
		if f.State != "permanent" {
			e.state = ""
		}
		fdb.have = append(fdb.have, e)
	}
	var neighs []struct {
		Dst    string   `json:"dst"`
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if err := listJSON(ctx, cfg.Runner, &neighs, "ip", "-4", "-j", "neigh", "show", "dev", VXLANDevice); err != nil {
		return nil, err
	}
	for _, n := range neighs {
		e := neighEntry(n.Dst, n.LLAddr)
		if !slices.Contains(n.State, "PERMANENT") {
			e.state = ""
		}
		neigh.have = append(neigh.have, e)
	}
	rs, err := routeSet(ctx, cfg, routes)
	if err != nil {
		return nil, err
	}
	return []entrySet{fdb, neigh, rs}, nil
}

// fdbEntry sends frames for mac to the node at dst.
func fdbEntry(mac, dst string) entry {
	return entry{key: mac, state: dst,
		add: []string{"bridge", "fdb", "replace", mac, "dev", VXLANDevice, "dst", dst, "self", "permanent"},
		del: []string{"bridge", "fdb", "del", mac, "dev", VXLANDevice, "dst", dst, "self"}}
}

// neighEntry resolves a peer's VTEP address ip to its mac.
func neighEntry(ip, mac string) entry {
	return entry{key: ip, state: mac,
		add: []string{"ip", "neigh", "replace", ip, "lladdr", mac, "dev", VXLANDevice, "nud", "permanent"},
		del: []string{"ip", "neigh", "del", ip, "dev", VXLANDevice}}
}

// addrEntry is an address of the VXLAN device.
func addrEntry(p netip.Prefix) entry {
	return entry{key: p.String(),
		add: []string{"ip", "addr", "replace", p.String(), "dev", VXLANDevice},
		del: []string{"ip", "addr", "del", p.String(), "dev", VXLANDevice}}
}

// link is what netd reads of a device in `ip -j -d addr show`.
type link struct {
	Name  string   `json:"ifname"`
	MTU   int      `json:"mtu"`
	MAC   string   `json:"address"`
	Flags []string `json:"flags"`
	Info  struct {
		Kind string          `json:"info_kind"`
		Data json.RawMessage `json:"info_data"` // its fields depend on the kind
	} `json:"linkinfo"`
	Addrs []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// vxlanInfo is the part of a VXLAN device's info_data netd sets.
type vxlanInfo struct {
	ID       int    `json:"id"`
	Local    string `json:"local"`
	Link     string `json:"link"`
	Port     int    `json:"port"`
	Learning bool   `json:"learning"`
}

// inet returns l's IPv4 addresses.
func (l *link) inet() []netip.Prefix {
	var out []netip.Prefix
	for _, a := range l.Addrs {
		if ip, err := netip.ParseAddr(a.Local); err == nil && a.Family == "inet" {
			out = append(out, netip.PrefixFrom(ip, a.PrefixLen))
		}
	}
	return out
}

// vxlan reports l's VXLAN settings; false when l is no VXLAN device.
func (l *link) vxlan() (vxlanInfo, bool) {
	var v vxlanInfo
	if l.Info.Kind != "vxlan" || json.Unmarshal(l.Info.Data, &v) != nil {
		return vxlanInfo{}, false
	}
	return v, true
}

// ensureVXLANDevice creates VXLANDevice from local's device, or re-creates
// it when its settings differ, brings it up, and gives it the VTEP address
// of the pod CIDR own (none when own is invalid: the bootstrap machine, or
// no podCIDR yet). It returns the device's MTU.
func ensureVXLANDevice(ctx context.Context, cfg Config, local netip.Addr, own netip.Prefix) (int, error) {
	var links []link
	if err := listJSON(ctx, cfg.Runner, &links, "ip", "-j", "-d", "addr", "show"); err != nil {
		return 0, err
	}
	var under, dev *link
	for i := range links {
		switch l := &links[i]; {
		case l.Name == VXLANDevice:
			dev = l
		case slices.ContainsFunc(l.inet(), func(p netip.Prefix) bool { return p.Addr() == local }):
			under = l
		}
	}
	if under == nil {
		return 0, fmt.Errorf("%s: no device has the node address %s", VXLANDevice, local)
	}
	mtu := under.MTU
	if mtu <= 0 {
		mtu = defaultUnderlayMTU
	}
	mtu -= VXLANOverhead
	mac := VTEPMAC(local)
	want := vxlanInfo{ID: VXLANID, Local: local.String(), Link: under.Name, Port: VXLANPort}
	if dev != nil {
		if got, ok := dev.vxlan(); !ok || got != want || dev.MAC != mac || dev.MTU != mtu {
			if err := run(ctx, cfg, []string{"ip", "link", "del", VXLANDevice}); err != nil {
				return 0, err
			}
			dev = nil
		}
	}
	var addrs entrySet
	if dev == nil {
		if err := run(ctx, cfg, []string{"ip", "link", "add", VXLANDevice, "address", mac, "mtu", strconv.Itoa(mtu),
			"type", "vxlan", "id", strconv.Itoa(VXLANID), "local", local.String(), "dev", under.Name,
			"dstport", strconv.Itoa(VXLANPort), "nolearning"}); err != nil {
			return 0, err
		}
		// Loose reverse-path filtering on the device: the bootstrap
		// machine, which has no VTEP address, sends through the tunnel
		// from its machine address, which the nodes route elsewhere.
		rpFilter := "net.ipv4.conf." + strings.ReplaceAll(VXLANDevice, ".", "/") + ".rp_filter=2"
		if err := run(ctx, cfg, []string{"sysctl", "-w", rpFilter}); err != nil {
			cfg.Log.Warnf("%v", err)
		}
	} else {
		for _, p := range dev.inet() {
			addrs.have = append(addrs.have, addrEntry(p))
		}
	}
	if dev == nil || !slices.Contains(dev.Flags, "UP") {
		if err := run(ctx, cfg, []string{"ip", "link", "set", VXLANDevice, "up"}); err != nil {
			return 0, err
		}
	}
	if own.IsValid() {
		addrs.want = []entry{addrEntry(netip.PrefixFrom(VTEPAddr(own), 32))}
	}
	return mtu, syncSets(ctx, cfg, addrs)
}
