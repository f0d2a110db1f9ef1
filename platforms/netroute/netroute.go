// Package netroute keeps kiln's dials to a cluster's addresses on routes
// of the cluster's own. Before kiln dials an address of a cluster (its API
// VIP, a machine, the machine-config server, etcd, a LoadBalancer
// address), a Policy says whether a route of the platform's leads there
// now; when none does, the dial fails with *UnreachableError and no packet
// is sent. Otherwise a dial to, say, a local cluster's API VIP before its
// bridge exists (or after it is gone) would leave through the host's
// default route, to an address on the user's network that may be someone
// else's.
//
// Lookup asks the kernel which way it would send a packet, without sending
// one: connecting a UDP socket runs the route lookup and picks the source
// address, and the interface holding that address is the way out. A
// destination that is an address of this host counts as reached through
// the interface holding it (the kernel delivers it locally).
package netroute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Route is the way the kernel would send a packet to Dest.
type Route struct {
	// Dest is the destination asked about.
	Dest netip.Addr
	// Source is the source address the kernel picks for Dest.
	Source netip.Addr
	// Interface is the name of the interface holding Source ("" when no
	// interface holds it).
	Interface string
}

// ErrNoRoute says the kernel has no route to the destination at all.
var ErrNoRoute = errors.New("no route")

// Lookup returns the way the kernel would send a packet to dest now. It
// sends nothing. A destination with no route at all returns an error
// wrapping ErrNoRoute.
func Lookup(dest netip.Addr) (Route, error) {
	dest = dest.Unmap()
	r := Route{Dest: dest}
	// Connecting a datagram socket selects the route and the source
	// address; no packet is sent before a write. Port 9 (discard) is only
	// a placeholder.
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dest, 9)))
	if err != nil {
		return r, fmt.Errorf("%w to %s: %w", ErrNoRoute, dest, err)
	}
	local := conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	conn.Close()
	r.Source = local
	r.Interface, err = holder(local)
	return r, err
}

// holder returns the name of the interface that holds addr, "" when none.
func holder(addr netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing interfaces: %w", err)
	}
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			continue // the interface went away meanwhile
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
					return i.Name, nil
				}
			}
		}
	}
	return "", nil
}

// UnreachableError is a dial that was refused because no route of the
// cluster's own leads to Addr now. No packet was sent.
type UnreachableError struct {
	// Addr is the address that was to be dialed.
	Addr netip.Addr
	// Why says which route was wanted and what the kernel would have done.
	Why string
}

// Error says that Addr is not reachable yet, and why.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s is not reachable yet: %s (nothing was sent)", e.Addr, e.Why)
}

// Policy decides whether kiln may dial an address of a cluster now.
type Policy interface {
	// Check returns nil when a packet to addr would take a route of the
	// cluster's own, else *UnreachableError (or the lookup's error).
	Check(addr netip.Addr) error
}

// PolicyFunc is a function as a Policy.
type PolicyFunc func(addr netip.Addr) error

// Check calls f.
func (f PolicyFunc) Check(addr netip.Addr) error { return f(addr) }

// Anywhere allows every address: a platform whose addresses are reached
// through the user's own routes.
type Anywhere struct{}

// Check allows addr.
func (Anywhere) Check(netip.Addr) error { return nil }

// Through allows an address only while the kernel would reach it through
// the interface named Interface (a local cluster's bridge).
type Through struct {
	// Interface is the interface the route must leave through.
	Interface string
	// Lookup is the route lookup; netroute.Lookup when nil.
	Lookup func(netip.Addr) (Route, error)
}

// Check allows addr when its route leaves through t.Interface.
func (t Through) Check(addr netip.Addr) error {
	lookup := t.Lookup
	if lookup == nil {
		lookup = Lookup
	}
	r, err := lookup(addr)
	if errors.Is(err, ErrNoRoute) {
		return &UnreachableError{Addr: addr, Why: fmt.Sprintf("no route at all, and it must lead through %s", t.Interface)}
	}
	if err != nil {
		return err
	}
	if r.Interface == t.Interface {
		return nil
	}
	via := r.Interface
	if via == "" {
		via = "an interface with no address"
	}
	return &UnreachableError{Addr: addr, Why: fmt.Sprintf(
		"its route leaves through %s (source %s), not through %s (is the cluster's bridge up? `kiln start cluster` brings it back)",
		via, r.Source, t.Interface)}
}

// Beside allows an address only while the kernel would reach it through
// the interface that holds Addr now: a daemon listening on a local
// cluster's bridge address (its load balancers) dials the machines behind
// it only through that bridge, and nothing once the address is gone.
type Beside struct {
	// Addr is this host's address on the cluster's own interface.
	Addr netip.Addr
}

// Check allows addr when its route leaves through the interface holding
// b.Addr.
func (b Beside) Check(addr netip.Addr) error {
	name, err := holder(b.Addr.Unmap())
	if err != nil {
		return err
	}
	if name == "" {
		return &UnreachableError{Addr: addr, Why: fmt.Sprintf("no interface holds %s any more", b.Addr)}
	}
	return Through{Interface: name}.Check(addr)
}

// Only allows the addresses it declares and no other: a platform whose
// addresses are the user's own hosts, declared in install-config, reached
// through the user's own routes. kiln never dials an address a node
// reports about itself unless it is declared.
type Only struct {
	// Addrs are the declared addresses.
	Addrs []netip.Addr
	// Names are declared host names (an API name the user's DNS resolves
	// to a load balancer of theirs): what they resolve to at the check is
	// allowed too.
	Names []string
	// Resolve looks a name up; net.DefaultResolver's when nil.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Check allows addr when o declares it, itself or by a name.
func (o Only) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if slices.Contains(o.Addrs, addr) {
		return nil
	}
	for _, n := range o.Names {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		as, err := Dialer{Resolve: o.Resolve}.resolve(ctx, n)
		cancel()
		if err == nil && slices.Contains(as, addr) {
			return nil
		}
	}
	declared := make([]string, 0, len(o.Addrs)+len(o.Names))
	for _, a := range o.Addrs {
		declared = append(declared, a.String())
	}
	declared = append(declared, o.Names...)
	return &UnreachableError{Addr: addr, Why: "it is none of the cluster's declared addresses (" + strings.Join(declared, ", ") + ")"}
}

// Dialer dials only what Policy allows. Its DialContext fits client-go's
// rest.Config.Dial, http.Transport.DialContext and grpc's context dialer.
type Dialer struct {
	// Policy decides; Anywhere when nil.
	Policy Policy
	// Dial makes the connection once allowed; a net.Dialer's when nil.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Resolve looks up a host name; net.DefaultResolver's when nil.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Fallback, when set, returns the addresses that serve what addr
	// serves (nil when none do), dialed in turn, each past Policy too,
	// when addr does not connect within FallbackAfter: kiln's clients of
	// an API VIP that the cluster announces itself reach a master while
	// the VIP is not announced (during an install, a restore, a failover).
	// The connection's TLS still verifies the name the caller dialed.
	Fallback func(addr netip.Addr) []netip.Addr
	// FallbackAfter is how long the first address gets before Fallback's
	// (default DefaultFallbackAfter).
	FallbackAfter time.Duration
}

// DefaultFallbackAfter is how long Dialer waits for an address that has a
// Fallback before it dials the others: an address on the local segment
// that nobody announces fails ARP only after about 3 s.
const DefaultFallbackAfter = 2 * time.Second

// DialContext checks address (host:port; a host name is resolved first,
// and the first address the policy allows is dialed) and dials it, or
// returns the policy's error without sending a packet to the cluster.
// When that address has a Fallback and does not connect in time, the
// fallback addresses are dialed in turn; the error names every attempt.
func (d Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	a, err := d.allowed(ctx, host)
	if err != nil {
		return nil, err
	}
	dial := d.Dial
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	var alternates []netip.Addr
	if d.Fallback != nil {
		alternates = d.Fallback(a)
	}
	if len(alternates) == 0 {
		return dial(ctx, network, net.JoinHostPort(a.String(), port))
	}
	after := d.FallbackAfter
	if after <= 0 {
		after = DefaultFallbackAfter
	}
	first, cancel := context.WithTimeout(ctx, after)
	conn, err := dial(first, network, net.JoinHostPort(a.String(), port))
	cancel()
	if err == nil || ctx.Err() != nil {
		return conn, err
	}
	errs := []error{err}
	for _, alt := range alternates {
		if err := d.policy().Check(alt); err != nil {
			errs = append(errs, err)
			continue
		}
		conn, err := dial(ctx, network, net.JoinHostPort(alt.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("%s did not connect, nor did what stands in for it: %w", a, errors.Join(errs...))
}

// CheckHost checks host (an address or a name, which is resolved) against
// the policy without dialing it, for callers that hand it to another
// program (kubectl) instead of dialing it themselves.
func (d Dialer) CheckHost(ctx context.Context, host string) error {
	_, err := d.allowed(ctx, host)
	return err
}

// policy returns d's Policy, Anywhere when it has none.
func (d Dialer) policy() Policy {
	if d.Policy == nil {
		return Anywhere{}
	}
	return d.Policy
}

// allowed returns the first address of host that the policy allows, else
// the policy's error for the first address.
func (d Dialer) allowed(ctx context.Context, host string) (netip.Addr, error) {
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return netip.Addr{}, err
	}
	var refused error
	for _, a := range addrs {
		err := d.policy().Check(a)
		if err == nil {
			return a, nil
		}
		if refused == nil {
			refused = err
		}
	}
	return netip.Addr{}, refused
}

// resolve returns the addresses of host (an address itself, or a name):
// at least one, or an error.
func (d Dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	lookup := d.Resolve
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", host)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}
