package sshconfig

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// AddrRange is one entry of platform.ssh.loadBalancerIPs: the addresses
// from First to Last, both included.
type AddrRange struct{ First, Last netip.Addr }

// Contains reports whether a is in r.
func (r AddrRange) Contains(a netip.Addr) bool {
	return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// overlaps reports whether r and o share an address.
func (r AddrRange) overlaps(o AddrRange) bool {
	return r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// ParseAddrRange parses "first-last" or a CIDR, as MetalLB's
// IPAddressPool reads its addresses; IPv4 only, as the hosts are.
func ParseAddrRange(s string) (AddrRange, error) {
	if first, last, ok := strings.Cut(s, "-"); ok {
		f, err1 := netip.ParseAddr(strings.TrimSpace(first))
		l, err2 := netip.ParseAddr(strings.TrimSpace(last))
		switch {
		case err1 != nil || err2 != nil || !f.Is4() || !l.Is4():
			return AddrRange{}, fmt.Errorf(`must be "first-last" of two IPv4 addresses, or a CIDR`)
		case l.Less(f):
			return AddrRange{}, fmt.Errorf("the range ends before it starts")
		}
		return AddrRange{f, l}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return AddrRange{}, fmt.Errorf(`must be "first-last" of two IPv4 addresses, or a CIDR`)
	}
	if p.Masked() != p {
		return AddrRange{}, fmt.Errorf("has host bits set: the network is %s", p.Masked())
	}
	return prefixRange(p), nil
}

// prefixRange returns the addresses of the IPv4 prefix p, its network and
// broadcast addresses included.
func prefixRange(p netip.Prefix) AddrRange {
	p = p.Masked()
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= uint32(uint64(1)<<(32-p.Bits()) - 1)
	return AddrRange{p.Addr(), netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})}
}

// validateLoadBalancerIPs checks platform.ssh.loadBalancerIPs: each entry a
// range or CIDR inside one machine network, none overlapping another,
// none holding a host's address or apiVIP (the speaker would answer ARP
// for them).
func validateLoadBalancerIPs(c *types.Config, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := c.Platform.SSH
	machines := c.MachineNetworkCIDRs()
	seen := map[int]AddrRange{} // the entries that parsed, by index
	for i, entry := range s.LoadBalancerIPs {
		ip := fp.Index(i)
		r, err := ParseAddrRange(entry)
		if err != nil {
			errs = append(errs, field.Invalid(ip, entry, err.Error()))
			continue
		}
		in := false
		for _, m := range machines {
			if m.Contains(r.First) && m.Contains(r.Last) {
				in = true
				if mr := prefixRange(m); r.Contains(mr.First) || r.Contains(mr.Last) {
					errs = append(errs, field.Invalid(ip, entry, fmt.Sprintf("must leave out %s's network and broadcast addresses", m)))
				}
			}
		}
		if !in {
			errs = append(errs, field.Invalid(ip, entry, "must be inside one of networking.machineNetwork ("+prefixes(machines)+"): the speaker announces the addresses on the hosts' segment"))
		}
		for j := range i {
			if o, ok := seen[j]; ok && r.overlaps(o) {
				errs = append(errs, field.Invalid(ip, entry, fmt.Sprintf("overlaps loadBalancerIPs[%d] (%s)", j, s.LoadBalancerIPs[j])))
			}
		}
		seen[i] = r
		for _, h := range s.Hosts {
			if a, err := netip.ParseAddr(h.Address); err == nil && r.Contains(a) {
				errs = append(errs, field.Invalid(ip, entry, fmt.Sprintf("holds host %s's address %s", h.Name, h.Address)))
			}
		}
		if a, err := netip.ParseAddr(s.APIVIP); err == nil && r.Contains(a) {
			errs = append(errs, field.Invalid(ip, entry, "holds apiVIP "+s.APIVIP))
		}
	}
	return errs
}
