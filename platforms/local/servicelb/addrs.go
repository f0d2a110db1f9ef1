package servicelb

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// Runner runs a command and returns its standard output
// (machine.ExecRunner is one).
type Runner interface {
	Run(ctx context.Context, argv ...string) ([]byte, error)
}

// Addresses manages the Services' addresses on the host bridge.
type Addresses interface {
	// List returns the /32 addresses on the bridge.
	List(ctx context.Context) ([]netip.Addr, error)
	// Add puts a on the bridge as a /32; an address already there is fine.
	Add(ctx context.Context, a netip.Addr) error
	// Del takes a off the bridge; an address already gone is fine.
	Del(ctx context.Context, a netip.Addr) error
}

// BridgeAddresses manages addresses with iproute2's `ip`.
type BridgeAddresses struct {
	Run    Runner
	Bridge string
}

var _ Addresses = BridgeAddresses{}

// List implements Addresses.
func (b BridgeAddresses) List(ctx context.Context) ([]netip.Addr, error) {
	out, err := b.Run.Run(ctx, listArgv(b.Bridge)...)
	if err != nil {
		return nil, fmt.Errorf("listing the addresses of %s: %w", b.Bridge, err)
	}
	return parseAddrs(string(out)), nil
}

// Add implements Addresses.
func (b BridgeAddresses) Add(ctx context.Context, a netip.Addr) error {
	have, err := b.List(ctx)
	if err != nil {
		return err
	}
	for _, h := range have {
		if h == a {
			return nil
		}
	}
	if _, err := b.Run.Run(ctx, addArgv(b.Bridge, a)...); err != nil {
		return fmt.Errorf("adding %s to %s: %w", a, b.Bridge, err)
	}
	return nil
}

// Del implements Addresses.
func (b BridgeAddresses) Del(ctx context.Context, a netip.Addr) error {
	have, err := b.List(ctx)
	if err != nil {
		return err
	}
	for _, h := range have {
		if h == a {
			if _, err := b.Run.Run(ctx, delArgv(b.Bridge, a)...); err != nil {
				return fmt.Errorf("removing %s from %s: %w", a, b.Bridge, err)
			}
		}
	}
	return nil
}

func listArgv(bridge string) []string {
	return []string{"ip", "-o", "-4", "addr", "show", "dev", bridge}
}

func addArgv(bridge string, a netip.Addr) []string {
	return []string{"ip", "addr", "add", a.String() + "/32", "dev", bridge}
}

func delArgv(bridge string, a netip.Addr) []string {
	return []string{"ip", "addr", "del", a.String() + "/32", "dev", bridge}
}

// parseAddrs returns the /32 addresses of `ip -o -4 addr show` output, e.g.
// "5: kiln-x    inet 10.66.0.192/32 scope global kiln-x\ ...".
func parseAddrs(out string) []netip.Addr {
	var addrs []netip.Addr
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" {
				continue
			}
			p, err := netip.ParsePrefix(f[i+1])
			if err == nil && p.Bits() == 32 {
				addrs = append(addrs, p.Addr())
			}
		}
	}
	return addrs
}
