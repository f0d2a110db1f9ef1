package netd

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// The listings of a KilnVXLAN pass. testdata/vxlan/*.json is what iproute2
// 6.1 printed for them in a network namespace after the commands of
// TestVXLANReconcile's first pass (with host0 a veth holding 10.66.0.11/24).
const (
	listLinks = "ip -j -d addr show"
	listFDB   = "bridge -j fdb show dev kiln.vxlan"
	listNeigh = "ip -4 -j neigh show dev kiln.vxlan"
)

// steady returns the listings of m0 with its tunnels to m1 and w0.
func steady(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for cmd, file := range map[string]string{listLinks: "addr.json", listFDB: "fdb.json", listNeigh: "neigh.json", listRoutes: "route.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "vxlan", file))
		if err != nil {
			t.Fatal(err)
		}
		out[cmd] = string(data)
	}
	return out
}

// edit replaces old in the listing of cmd; old must be there.
func edit(t *testing.T, out map[string]string, cmd, old, new string) {
	t.Helper()
	if !strings.Contains(out[cmd], old) {
		t.Fatalf("%s: no %s in %s", cmd, old, out[cmd])
	}
	out[cmd] = strings.Replace(out[cmd], old, new, 1)
}

func vxlanConfig(t *testing.T, r Runner) Config {
	return Config{NodeName: "m0", CNIConfPath: filepath.Join(t.TempDir(), "10-kiln.conflist"), Runner: r, Log: quietLog(),
		NetworkType: types.NetworkTypeKilnVXLAN}
}

func vxlanNodes() []*corev1.Node {
	return []*corev1.Node{
		node("m0", "10.66.0.11", "10.128.0.0/23"),
		node("m1", "10.66.0.12", "10.128.2.0/23"),
		node("w0", "10.66.0.21", "10.128.4.0/23"),
	}
}

func TestVTEP(t *testing.T) {
	if got := VTEPMAC(netip.MustParseAddr("10.66.0.255")); got != "0a:58:0a:42:00:ff" {
		t.Errorf("VTEPMAC = %s", got)
	}
	if got := VTEPAddr(netip.MustParsePrefix("10.128.2.0/23")); got != netip.MustParseAddr("10.128.2.0") {
		t.Errorf("VTEPAddr = %s", got)
	}
}

// TestVXLANReconcile: a new node gets its device and the entries to every
// peer, a second pass only lists, a departed node's entries go, and a
// joining node's come.
func TestVXLANReconcile(t *testing.T) {
	fresh := steady(t)
	fresh[listLinks] = `[{"ifname":"lo","mtu":65536,"flags":["LOOPBACK","UP"],"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},` +
		`{"ifname":"host0","mtu":1500,"flags":["BROADCAST","UP"],"linkinfo":{"info_kind":"veth"},"addr_info":[{"family":"inet","local":"10.66.0.11","prefixlen":24}]}]`
	fresh[listFDB], fresh[listNeigh], fresh[listRoutes] = "[]", "[]", "[]"
	r := &fakeRunner{out: fresh}
	cfg := vxlanConfig(t, r)
	ctx := context.Background()
	if err := reconcile(ctx, cfg, vxlanNodes()); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r,
		listLinks,
		"ip link add kiln.vxlan address 0a:58:0a:42:00:0b mtu 1450 type vxlan id 1 local 10.66.0.11 dev host0 dstport 4789 nolearning",
		"sysctl -w net.ipv4.conf.kiln/vxlan.rp_filter=2",
		"ip link set kiln.vxlan up",
		"ip addr replace 10.128.0.0/32 dev kiln.vxlan",
		listFDB, listNeigh, listRoutes,
		"bridge fdb replace 0a:58:0a:42:00:0c dev kiln.vxlan dst 10.66.0.12 self permanent",
		"bridge fdb replace 0a:58:0a:42:00:15 dev kiln.vxlan dst 10.66.0.21 self permanent",
		"ip neigh replace 10.128.2.0 lladdr 0a:58:0a:42:00:0c dev kiln.vxlan nud permanent",
		"ip neigh replace 10.128.4.0 lladdr 0a:58:0a:42:00:15 dev kiln.vxlan nud permanent",
		"ip route replace 10.128.2.0/23 via 10.128.2.0 dev kiln.vxlan onlink proto 199",
		"ip route replace 10.128.4.0/23 via 10.128.4.0 dev kiln.vxlan onlink proto 199",
		"systemctl restart containerd.service",
	)
	data, err := os.ReadFile(cfg.CNIConfPath)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			MTU int `json:"mtu"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil || conf.Plugins[0].MTU != 1450 {
		t.Errorf("bridge MTU = %+v (%v), want the device's 1450", conf.Plugins, err)
	}

	// The state the first pass made: nothing to do.
	r.out = steady(t)
	if err := reconcile(ctx, cfg, vxlanNodes()); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, listLinks, listFDB, listNeigh, listRoutes)

	// w0 is gone: its route, neighbour and forwarding entry go, in that order.
	if err := reconcile(ctx, cfg, vxlanNodes()[:2]); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, listLinks, listFDB, listNeigh, listRoutes,
		"ip route del 10.128.4.0/23 proto 199",
		"ip neigh del 10.128.4.0 dev kiln.vxlan",
		"bridge fdb del 0a:58:0a:42:00:15 dev kiln.vxlan dst 10.66.0.21 self",
	)

	// w0 leaves and w1 joins in one pass (the example of docs/pod-network.md).
	nodes := append(vxlanNodes()[:2], node("w1", "10.66.0.22", "10.128.6.0/23"))
	if err := reconcile(ctx, cfg, nodes); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, listLinks, listFDB, listNeigh, listRoutes,
		"bridge fdb replace 0a:58:0a:42:00:16 dev kiln.vxlan dst 10.66.0.22 self permanent",
		"ip neigh replace 10.128.6.0 lladdr 0a:58:0a:42:00:16 dev kiln.vxlan nud permanent",
		"ip route replace 10.128.6.0/23 via 10.128.6.0 dev kiln.vxlan onlink proto 199",
		"ip route del 10.128.4.0/23 proto 199",
		"ip neigh del 10.128.4.0 dev kiln.vxlan",
		"bridge fdb del 0a:58:0a:42:00:15 dev kiln.vxlan dst 10.66.0.21 self",
	)
}

// TestVXLANDevice: a device that differs from what netd would create is
// re-created or repaired; only the device step's commands are compared.
func TestVXLANDevice(t *testing.T) {
	recreateWithMTU := func(mtu string) []string {
		return []string{
			"ip link del kiln.vxlan",
			"ip link add kiln.vxlan address 0a:58:0a:42:00:0b mtu " + mtu + " type vxlan id 1 local 10.66.0.11 dev host0 dstport 4789 nolearning",
			"sysctl -w net.ipv4.conf.kiln/vxlan.rp_filter=2",
			"ip link set kiln.vxlan up",
			"ip addr replace 10.128.0.0/32 dev kiln.vxlan",
		}
	}
	recreate := recreateWithMTU("1450")
	tests := []struct {
		name     string
		old, new string // an edit of the steady listing
		mtu      int
		want     []string
	}{
		{"learning", `"learning":false`, `"learning":true`, 1450, recreate},
		{"other port", `"port":4789`, `"port":8472`, 1450, recreate},
		{"other MAC", `"address":"0a:58:0a:42:00:0b"`, `"address":"0a:58:0a:42:00:99"`, 1450, recreate},
		{"other MTU", `"mtu":1450`, `"mtu":1400`, 1450, recreate},
		{"underlay MTU 9000", `"ifname":"host0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500`,
			`"ifname":"host0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000`, 8950, recreateWithMTU("8950")},
		{"down", `"flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1450`, `"flags":["BROADCAST","MULTICAST"],"mtu":1450`, 1450,
			[]string{"ip link set kiln.vxlan up"}},
		{"stale address", `"local":"10.128.0.0"`, `"local":"10.128.6.0"`, 1450,
			[]string{"ip addr replace 10.128.0.0/32 dev kiln.vxlan", "ip addr del 10.128.6.0/32 dev kiln.vxlan"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := steady(t)
			edit(t, out, listLinks, tt.old, tt.new)
			r := &fakeRunner{out: out}
			mtu, err := ensureVXLANDevice(context.Background(), vxlanConfig(t, r), netip.MustParseAddr("10.66.0.11"), netip.MustParsePrefix("10.128.0.0/23"))
			if err != nil {
				t.Fatal(err)
			}
			checkCalls(t, r, append([]string{listLinks}, tt.want...)...)
			if mtu != tt.mtu {
				t.Errorf("mtu = %d, want %d", mtu, tt.mtu)
			}
		})
	}
}

// TestVXLANBootstrap: the bootstrap machine is no Node: its address comes
// from --node-ip, its device has no VTEP address, it tunnels to every node
// and writes no CNI config.
func TestVXLANBootstrap(t *testing.T) {
	out := steady(t)
	edit(t, out, listLinks, `"local":"10.66.0.11","prefixlen":24`, `"local":"10.66.0.10","prefixlen":24`)
	out[listFDB], out[listNeigh], out[listRoutes] = "[]", "[]", "[]"
	r := &fakeRunner{out: out}
	cfg := vxlanConfig(t, r)
	cfg.NodeName, cfg.NodeIP = "bootstrap", netip.MustParseAddr("10.66.0.10")
	if err := reconcile(context.Background(), cfg, vxlanNodes()[:2]); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r,
		listLinks,
		"ip link del kiln.vxlan", // its tunnel left from 10.66.0.11
		"ip link add kiln.vxlan address 0a:58:0a:42:00:0a mtu 1450 type vxlan id 1 local 10.66.0.10 dev host0 dstport 4789 nolearning",
		"sysctl -w net.ipv4.conf.kiln/vxlan.rp_filter=2",
		"ip link set kiln.vxlan up",
		listFDB, listNeigh, listRoutes,
		"bridge fdb replace 0a:58:0a:42:00:0b dev kiln.vxlan dst 10.66.0.11 self permanent",
		"bridge fdb replace 0a:58:0a:42:00:0c dev kiln.vxlan dst 10.66.0.12 self permanent",
		"ip neigh replace 10.128.0.0 lladdr 0a:58:0a:42:00:0b dev kiln.vxlan nud permanent",
		"ip neigh replace 10.128.2.0 lladdr 0a:58:0a:42:00:0c dev kiln.vxlan nud permanent",
		"ip route replace 10.128.0.0/23 via 10.128.0.0 dev kiln.vxlan onlink proto 199",
		"ip route replace 10.128.2.0/23 via 10.128.2.0 dev kiln.vxlan onlink proto 199",
	)
	if _, err := os.Stat(cfg.CNIConfPath); err == nil {
		t.Error("the bootstrap machine wrote a CNI config")
	}
}

func TestVXLANWithoutNodeAddress(t *testing.T) {
	out := steady(t)
	edit(t, out, listLinks, `"local":"10.66.0.11","prefixlen":24`, `"local":"10.66.0.99","prefixlen":24`)
	r := &fakeRunner{out: out}
	err := reconcile(context.Background(), vxlanConfig(t, r), vxlanNodes())
	if err == nil || !strings.Contains(err.Error(), "no device has the node address 10.66.0.11") {
		t.Fatalf("err = %v", err)
	}
	checkCalls(t, r, listLinks) // nothing changed, no CNI config
}
