package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/installconfig/types/local/localconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// Names of what splitSegments creates on the host: a second bridge and a
// router network namespace joined to both bridges by veth pairs.
const (
	segBridge  = "ke2e-seg2"
	segRouter  = "ke2e-router"
	segVeth1   = "ke2e-r1" // host end on the cluster's bridge; "r1" in the router
	segVeth2   = "ke2e-r2" // host end on segBridge; "r2" in the router
	segRouter1 = 5         // the router's address on segment 1: machineNetwork offset, below the bootstrap's
	segRouter2 = 6         // and on segment 2 (a /32)
)

// segmentNode is a machine splitSegments places: its name (the machine's
// and its Node's) and address.
type segmentNode struct{ name, addr string }

// splitLocalSegments is splitSegments for the local platform's cluster
// infraID of masters and workers on machineCIDR, its machines' addresses
// from kiln's own address plan.
func splitLocalSegments(ctx context.Context, t *testing.T, client kubernetes.Interface, infraID, machineCIDR string, masters, workers int) {
	t.Helper()
	shape := machines.DefaultShape(infraID, masters, workers)
	cidr, err := netip.ParsePrefix(machineCIDR)
	if err != nil {
		t.Fatal(err)
	}
	nodes := func(names []string) []segmentNode {
		var out []segmentNode
		for _, name := range names {
			_, a, err := localconfig.MachineAddress(cidr.Masked(), infraID, name)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, segmentNode{name, a.String()})
		}
		return out
	}
	splitSegments(ctx, t, client, machine.NewManager(machine.Options{}), machineCIDR, nodes(shape.Masters), nodes(shape.Workers))
}

// splitSegments moves the worker machines onto a second L2 segment: their
// veths leave the cluster's bridge for segBridge, and the two segments are
// joined only by a router (a network namespace with forwarding and proxy
// ARP, so no machine's address or route changes). Afterwards no master
// shares a broadcast domain with a worker - each resolves the other's
// address to the router's MAC - and host-gw routes (pod CIDR via the peer
// node's address, on-link) could not work: the router knows no pod CIDR.
// Only the overlay's encapsulated traffic, addressed node to node, crosses.
// The host's own address stays on segment 1, so the workers reach the API
// VIP through the router too. The split is undone when the test ends (the
// local test's destroy runs after that; the ssh test destroys its cluster
// through the router). The machines are mgr's (systemd-nspawn containers whose host0 is a veth
// on the bridge of machineCIDR, the local platform's machines and the ssh
// platform's test hosts alike).
func splitSegments(ctx context.Context, t *testing.T, client kubernetes.Interface, mgr *machine.Manager, machineCIDR string, masters, workers []segmentNode) {
	t.Helper()
	requireMachineHost(t, "ip")
	cidr := netip.MustParsePrefix(machineCIDR)
	var workerNames []string
	addrs := map[string]string{}
	veth := map[string]string{}
	for _, n := range slices.Concat(masters, workers) {
		addrs[n.name], veth[n.name] = n.addr, hostVeth(ctx, t, mgr, n.name)
	}
	for _, w := range workers {
		workerNames = append(workerNames, w.name)
	}
	addr := func(name string) string { return addrs[name] }
	bridge := linkMaster(t, veth[masters[0].name])
	r1, r2 := nthAddr(cidr, segRouter1), nthAddr(cidr, segRouter2)

	t.Cleanup(func() { joinSegments(t, bridge, veth, workerNames) })
	ns := []string{"ip", "netns", "exec", segRouter}
	steps := [][]string{
		{"ip", "link", "add", segBridge, "type", "bridge", "stp_state", "0"},
		{"ip", "link", "set", segBridge, "up"},
		{"ip", "netns", "add", segRouter},
		{"ip", "link", "add", segVeth1, "type", "veth", "peer", "name", "r1", "netns", segRouter},
		{"ip", "link", "add", segVeth2, "type", "veth", "peer", "name", "r2", "netns", segRouter},
		{"ip", "link", "set", segVeth1, "master", bridge, "up"},
		{"ip", "link", "set", segVeth2, "master", segBridge, "up"},
		// Proxy ARP answers at once (no random delay) for addresses
		// routed out of the other interface.
		append(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
			"net.ipv4.conf.r1.rp_filter=0", "net.ipv4.conf.r2.rp_filter=0",
			"net.ipv4.conf.r1.proxy_arp=1", "net.ipv4.conf.r2.proxy_arp=1",
			"net.ipv4.neigh.r1.proxy_delay=0", "net.ipv4.neigh.r2.proxy_delay=0"),
		append(ns, "ip", "link", "set", "lo", "up"),
		append(ns, "ip", "addr", "add", fmt.Sprintf("%s/%d", r1, cidr.Bits()), "dev", "r1"),
		append(ns, "ip", "addr", "add", r2.String()+"/32", "dev", "r2"),
		append(ns, "ip", "link", "set", "r1", "up"),
		append(ns, "ip", "link", "set", "r2", "up"),
	}
	for _, w := range workerNames {
		steps = append(steps, append(ns, "ip", "route", "add", addr(w)+"/32", "dev", "r2", "src", r2.String()))
	}
	for _, w := range workerNames {
		steps = append(steps, []string{"ip", "link", "set", veth[w], "master", segBridge})
	}
	for _, s := range steps {
		hostRun(t, s...)
	}
	// Forget the peers' MACs learnt while everything shared one segment.
	hostRun(t, "ip", "neigh", "flush", "dev", bridge)
	for name := range veth {
		if out, err := mgr.Exec(ctx, name, "ip", "neigh", "flush", "dev", "host0"); err != nil {
			t.Fatalf("%s: ip neigh flush: %v\n%s", name, err, out)
		}
	}

	// Each side now sees the other's address behind the router's MAC.
	mac1, mac2 := routerMAC(t, "r1"), routerMAC(t, "r2")
	master, masterIP := masters[0].name, masters[0].addr
	for _, w := range workerNames {
		workerIP := addr(w)
		if got := resolvedMAC(ctx, t, mgr, w, masterIP); got != mac2 {
			t.Fatalf("%s resolves master %s to %q, want the router's %s: not on separate segments", w, masterIP, got, mac2)
		}
		if got := resolvedMAC(ctx, t, mgr, master, workerIP); got != mac1 {
			t.Fatalf("%s resolves worker %s to %q, want the router's %s: not on separate segments", master, workerIP, got, mac1)
		}
		if got := linkMaster(t, veth[w]); got != segBridge {
			t.Fatalf("%s's veth %s is on %q, want %s", w, veth[w], got, segBridge)
		}
	}
	t.Logf("workers %v on segment %s, masters on %s; routed through %s (%s, %s)", workerNames, segBridge, bridge, segRouter, r1, r2)
	assertNodesReady(ctx, t, client, len(masters)+len(workers))
}

// joinSegments puts the workers back on the cluster's bridge and removes
// the router and the second bridge: destroy finds the host as create left it.
func joinSegments(t *testing.T, bridge string, veth map[string]string, workers []string) {
	for _, w := range workers {
		if out, err := exec.Command("ip", "link", "set", veth[w], "master", bridge).CombinedOutput(); err != nil {
			t.Logf("moving %s back to %s: %v: %s", veth[w], bridge, err, out)
		}
	}
	for _, argv := range [][]string{{"ip", "netns", "del", segRouter}, {"ip", "link", "del", segBridge}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find") && !strings.Contains(string(out), "No such file") {
			t.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
}

// hostVeth returns the host end of machine name's host0: the host link
// whose index is host0's iflink.
func hostVeth(ctx context.Context, t *testing.T, mgr *machine.Manager, name string) string {
	t.Helper()
	out, err := mgr.Exec(ctx, name, "cat", "/sys/class/net/host0/iflink")
	if err != nil {
		t.Fatalf("%s: host0's peer: %v\n%s", name, err, out)
	}
	idx, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("%s: host0 iflink %q: %v", name, out, err)
	}
	var links []struct {
		Index  int    `json:"ifindex"`
		IfName string `json:"ifname"`
	}
	hostJSON(t, &links, "ip", "-j", "link", "show")
	for _, l := range links {
		if l.Index == idx {
			return l.IfName
		}
	}
	t.Fatalf("%s: no host link with index %d", name, idx)
	return ""
}

// linkMaster returns the bridge link is attached to.
func linkMaster(t *testing.T, link string) string {
	t.Helper()
	var links []struct {
		Master string `json:"master"`
	}
	hostJSON(t, &links, "ip", "-j", "link", "show", "dev", link)
	if len(links) != 1 {
		t.Fatalf("ip link show dev %s: %d links", link, len(links))
	}
	return links[0].Master
}

// routerMAC returns the MAC of the router's interface dev.
func routerMAC(t *testing.T, dev string) string {
	t.Helper()
	var links []struct {
		Address string `json:"address"`
	}
	hostJSON(t, &links, "ip", "-n", segRouter, "-j", "link", "show", "dev", dev)
	if len(links) != 1 {
		t.Fatalf("router %s: %d links", dev, len(links))
	}
	return links[0].Address
}

// resolvedMAC makes machine name connect to addr's kubelet port (any
// answer, even a refusal, needs the address resolved) and returns the MAC
// its neighbour table then holds for addr on host0.
func resolvedMAC(ctx context.Context, t *testing.T, mgr *machine.Manager, name, addr string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mgr.Exec(ctx, name, "timeout", "3", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/10250", addr))
		out, err := mgr.Exec(ctx, name, "ip", "-j", "neigh", "show", addr, "dev", "host0")
		var n []struct {
			LLAddr string   `json:"lladdr"`
			State  []string `json:"state"`
		}
		if err == nil && json.Unmarshal(out, &n) == nil && len(n) == 1 && n[0].LLAddr != "" {
			return n[0].LLAddr
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s is not resolved on host0: %s %v", name, addr, out, err)
		}
		time.Sleep(time.Second)
	}
}

// nthAddr returns the address at offset i of block p (the router's
// addresses, which kiln's address plan leaves free).
func nthAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Masked().Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// hostRun runs argv on the host and fails the test naming it.
func hostRun(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// hostJSON runs argv on the host and decodes its JSON output into v.
func hostJSON(t *testing.T, v any, argv ...string) {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
}
