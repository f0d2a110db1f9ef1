package netd

import (
	"context"
	"net/netip"
	"testing"
)

// A node without a route to the Service network gets one on-link through
// its address's interface, once; a node that routes it, or has netd's
// route already, is left alone; and the pod-route sync keeps the route.
func TestReconcileServiceRoute(t *testing.T) {
	const (
		own   = "ip -j route show 172.30.0.0/16 proto 199"
		get   = "ip -j route get 172.30.0.1"
		links = "ip -j -4 addr show to 10.200.13.12/32"
		add   = "ip route replace 172.30.0.0/16 dev eth0 scope link src 10.200.13.12 proto 199"
	)
	cfg := func(r *fakeRunner) Config {
		return Config{Runner: r, Log: quietLog(), NodeIP: netip.MustParseAddr("10.200.13.12"),
			ServiceRoute: netip.MustParsePrefix("172.30.0.0/16")}
	}
	ctx := context.Background()

	unreachable := &fakeRunner{fail: map[string]bool{get: true},
		out: map[string]string{get: "RTNETLINK answers: Network is unreachable", links: `[{"ifindex":2,"ifname":"eth0"}]`}}
	if err := reconcileServiceRoute(ctx, cfg(unreachable)); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, unreachable, own, get, links, add)

	routed := &fakeRunner{out: map[string]string{get: `[{"dst":"172.30.0.1","gateway":"10.200.13.1","dev":"eth0"}]`}}
	if err := reconcileServiceRoute(ctx, cfg(routed)); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, routed, own, get)

	ours := &fakeRunner{out: map[string]string{own: `[{"dst":"172.30.0.0/16","dev":"eth0","protocol":"199","scope":"link"}]`}}
	if err := reconcileServiceRoute(ctx, cfg(ours)); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, ours, own)

	off := &fakeRunner{}
	c := cfg(off)
	c.ServiceRoute = netip.Prefix{}
	if err := reconcileServiceRoute(ctx, c); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, off)

	// No interface holds the address: an error naming both.
	lost := &fakeRunner{fail: map[string]bool{get: true}, out: map[string]string{links: `[]`}}
	if err := reconcileServiceRoute(ctx, cfg(lost)); err == nil {
		t.Error("no interface with the node's address: want an error")
	}

	// The pod routes' sync neither counts nor deletes it.
	sync := &fakeRunner{out: map[string]string{listRoutes: `[{"dst":"172.30.0.0/16","dev":"eth0","protocol":"199","scope":"link"},` +
		`{"dst":"10.128.2.0/23","gateway":"10.200.13.11","dev":"eth0","protocol":"199"}]`}}
	set, err := routeSet(ctx, cfg(sync), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.have) != 1 || set.have[0].key != "10.128.2.0/23" {
		t.Errorf("routeSet's routes = %+v; want the pod route alone", set.have)
	}
}
