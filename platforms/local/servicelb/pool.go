package servicelb

import (
	"fmt"
	"net/netip"
)

// Pool is the range of addresses LoadBalancer Services get, both ends
// included.
type Pool struct {
	First netip.Addr `json:"first"`
	Last  netip.Addr `json:"last"`
}

// PoolFor returns the pool of a machine network: its last quarter without
// the broadcast address (10.66.0.192-10.66.0.254 for 10.66.0.0/24). Machines
// take fixed offsets from the bottom of the block, the host its first
// address.
func PoolFor(machines netip.Prefix) (Pool, error) {
	machines = machines.Masked()
	if !machines.Addr().Is4() || machines.Bits() > 28 {
		return Pool{}, fmt.Errorf("machine network %s: want an IPv4 block of at least 16 addresses", machines)
	}
	size := uint32(1) << (32 - machines.Bits())
	base := be32(machines.Addr())
	return Pool{First: addr4(base + size/4*3), Last: addr4(base + size - 2)}, nil
}

// Contains reports whether a is in the pool.
func (p Pool) Contains(a netip.Addr) bool {
	return a.Is4() && p.First.Compare(a) <= 0 && a.Compare(p.Last) <= 0
}

// Size is the number of addresses in the pool; 0 for an invalid pool.
func (p Pool) Size() int {
	if p.Validate() != nil {
		return 0
	}
	return int(be32(p.Last)-be32(p.First)) + 1
}

// String formats the pool as "first-last".
func (p Pool) String() string { return p.First.String() + "-" + p.Last.String() }

// Validate checks that the pool is a non-empty IPv4 range.
func (p Pool) Validate() error {
	if !p.First.Is4() || !p.Last.Is4() || p.Last.Less(p.First) {
		return fmt.Errorf("address pool %s: want two IPv4 addresses, the first not above the last", p)
	}
	return nil
}

// allocate returns the lowest address of the pool that is neither used nor
// excluded.
func (p Pool) allocate(used map[netip.Addr]bool) (netip.Addr, bool) {
	for a := p.First; p.Contains(a); a = a.Next() {
		if !used[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func be32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addr4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
