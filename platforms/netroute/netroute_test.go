package netroute

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeRoutes answers route lookups from a table: destination -> interface.
func fakeRoutes(table map[string]string) func(netip.Addr) (Route, error) {
	return func(a netip.Addr) (Route, error) {
		ifc, ok := table[a.String()]
		if !ok {
			return Route{Dest: a}, ErrNoRoute
		}
		return Route{Dest: a, Source: netip.MustParseAddr("192.0.2.2"), Interface: ifc}, nil
	}
}

func TestThroughDecides(t *testing.T) {
	routes := fakeRoutes(map[string]string{
		"10.66.205.1":  "kiln-abc", // the API VIP on the bridge
		"10.66.205.11": "kiln-abc", // a machine behind it
		"10.66.9.1":    "eth0",     // the bridge is gone: the default route
	})
	p := Through{Interface: "kiln-abc", Lookup: routes}
	for _, tc := range []struct {
		addr string
		ok   bool
		why  string
	}{
		{"10.66.205.1", true, ""},
		{"10.66.205.11", true, ""},
		{"10.66.9.1", false, "leaves through eth0"},
		{"10.99.0.1", false, "no route at all"},
	} {
		err := p.Check(netip.MustParseAddr(tc.addr))
		if tc.ok != (err == nil) {
			t.Errorf("%s: err = %v, want allowed %v", tc.addr, err, tc.ok)
			continue
		}
		if err == nil {
			continue
		}
		var ue *UnreachableError
		if !errors.As(err, &ue) || ue.Addr.String() != tc.addr || !strings.Contains(ue.Why, tc.why) {
			t.Errorf("%s: err = %#v, want *UnreachableError saying %q", tc.addr, err, tc.why)
		}
	}
}

// The kernel's own answer for this host's loopback: the interface holding
// the source address is lo, and an interface that does not exist never
// matches.
func TestLookupAndThroughOnLoopback(t *testing.T) {
	lo := loopbackName(t)
	r, err := Lookup(netip.MustParseAddr("127.0.0.7"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Interface != lo || !r.Source.IsLoopback() {
		t.Fatalf("Lookup(127.0.0.7) = %+v, want source on %s", r, lo)
	}
	if err := (Through{Interface: lo}).Check(netip.MustParseAddr("127.0.0.7")); err != nil {
		t.Errorf("through %s: %v", lo, err)
	}
	if err := (Through{Interface: "kiln-nosuch"}).Check(netip.MustParseAddr("127.0.0.7")); err == nil {
		t.Error("through a missing bridge: allowed")
	}
	if err := (Beside{Addr: netip.MustParseAddr("127.0.0.1")}).Check(netip.MustParseAddr("127.0.0.9")); err != nil {
		t.Errorf("beside 127.0.0.1: %v", err)
	}
	// No interface holds a documentation address: a daemon whose listen
	// address is gone dials nothing.
	err = (Beside{Addr: netip.MustParseAddr("198.51.100.77")}).Check(netip.MustParseAddr("127.0.0.9"))
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Why, "no interface holds 198.51.100.77") {
		t.Errorf("beside a vanished address: %v", err)
	}
}

func loopbackName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}

func TestOnlyDeclared(t *testing.T) {
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "api.rack.example.com" {
			return []netip.Addr{netip.MustParseAddr("10.20.0.100")}, nil
		}
		return nil, errors.New("no such host")
	}
	o := Only{Addrs: []netip.Addr{netip.MustParseAddr("10.20.0.11")}, Names: []string{"api.rack.example.com"}, Resolve: resolve}
	for addr, ok := range map[string]bool{"10.20.0.11": true, "10.20.0.100": true, "10.20.0.12": false, "203.0.113.5": false} {
		if err := o.Check(netip.MustParseAddr(addr)); ok != (err == nil) {
			t.Errorf("%s: err = %v, want allowed %v", addr, err, ok)
		}
	}
}

// A refused dial never reaches the dial function: nothing is sent. An
// allowed one dials the checked address, not the name again.
func TestDialerSendsNothingWhenRefused(t *testing.T) {
	var dialed []string
	d := Dialer{
		Policy: Through{Interface: "kiln-abc", Lookup: fakeRoutes(map[string]string{"10.66.205.1": "kiln-abc", "10.66.9.1": "eth0"})},
		Dial: func(_ context.Context, _, address string) (net.Conn, error) {
			dialed = append(dialed, address)
			return nil, errors.New("fake dial")
		},
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("10.66.9.1"), netip.MustParseAddr("10.66.205.1")}, nil
		},
	}
	_, err := d.DialContext(context.Background(), "tcp", "10.66.9.1:6443")
	var ue *UnreachableError
	if !errors.As(err, &ue) || len(dialed) != 0 {
		t.Fatalf("refused dial: err %v, dialed %v", err, dialed)
	}
	if _, err := d.DialContext(context.Background(), "tcp", "api.example:6443"); err == nil || err.Error() != "fake dial" {
		t.Fatalf("allowed dial: %v", err)
	}
	if len(dialed) != 1 || dialed[0] != "10.66.205.1:6443" {
		t.Fatalf("dialed %v, want [10.66.205.1:6443]", dialed)
	}
	if err := d.CheckHost(context.Background(), "10.66.9.1"); !errors.As(err, &ue) {
		t.Fatalf("CheckHost through eth0: %v", err)
	}
}

// A name that resolves to nothing is an error, never a nil connection.
func TestDialerNameWithoutAddress(t *testing.T) {
	d := Dialer{
		Dial:    func(context.Context, string, string) (net.Conn, error) { t.Fatal("dialed"); return nil, nil },
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, nil },
	}
	if c, err := d.DialContext(context.Background(), "tcp", "api.example:6443"); c != nil || err == nil {
		t.Fatalf("DialContext = %v, %v; want an error", c, err)
	}
}

// An address with a Fallback that does not connect in time hands over to
// the fallback addresses in turn, each past the policy; one that connects
// is used alone; with no fallback addresses the first error stands.
func TestDialerFallback(t *testing.T) {
	vip, m0, m1, m2 := netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("192.0.2.12"), netip.MustParseAddr("192.0.2.13")
	var dialed []string
	up := map[string]bool{}
	d := Dialer{
		Policy: Only{Addrs: []netip.Addr{vip, m1, m2}}, // m0 is not the cluster's
		Dial: func(ctx context.Context, _, address string) (net.Conn, error) {
			dialed = append(dialed, address)
			if up[address] {
				c, _ := net.Pipe()
				return c, nil
			}
			if address == "192.0.2.5:6443" {
				<-ctx.Done() // unannounced: no ARP answer
				return nil, ctx.Err()
			}
			return nil, errors.New("refused")
		},
		Fallback: func(a netip.Addr) []netip.Addr {
			if a == vip {
				return []netip.Addr{m0, m1, m2}
			}
			return nil
		},
		FallbackAfter: 50 * time.Millisecond,
	}
	up["192.0.2.13:6443"] = true
	c, err := d.DialContext(context.Background(), "tcp", "192.0.2.5:6443")
	if err != nil || c == nil {
		t.Fatalf("VIP down, a master up: %v", err)
	}
	c.Close()
	if want := []string{"192.0.2.5:6443", "192.0.2.12:6443", "192.0.2.13:6443"}; !slices.Equal(dialed, want) {
		t.Errorf("dialed %v, want %v (m0 is refused by the policy, never dialed)", dialed, want)
	}

	dialed, up = nil, map[string]bool{"192.0.2.5:6443": true, "192.0.2.12:6443": true}
	if c, err := d.DialContext(context.Background(), "tcp", "192.0.2.5:6443"); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	if !slices.Equal(dialed, []string{"192.0.2.5:6443"}) {
		t.Errorf("VIP up: dialed %v, want the VIP alone", dialed)
	}

	dialed, up = nil, map[string]bool{}
	_, err = d.DialContext(context.Background(), "tcp", "192.0.2.5:6443")
	var ue *UnreachableError
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ue) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("all down: %v; want every attempt named", err)
	}
	dialed = nil
	if _, err := d.DialContext(context.Background(), "tcp", "192.0.2.12:6443"); err == nil || err.Error() != "refused" || len(dialed) != 1 {
		t.Errorf("an address without fallback: %v, dialed %v", err, dialed)
	}
}
