package sshconfig

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// ManagedAPIVIP returns the API VIP that kiln announces for s: apiVIP when
// it is an IPv4 address that no host has and apiVIPManaged is not false.
// A VIP that is a master's own address, a DNS name or the user's load
// balancer (apiVIPManaged: false) is the user's to keep.
func ManagedAPIVIP(s *ssh.Platform) (netip.Addr, bool) {
	if s == nil || (s.APIVIPManaged != nil && !*s.APIVIPManaged) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s.APIVIP)
	if err != nil || !a.Is4() || hostAddress(s, s.APIVIP) {
		return netip.Addr{}, false
	}
	return a, true
}

// hostAddress reports whether addr is a host's address or name.
func hostAddress(s *ssh.Platform, addr string) bool {
	for _, h := range s.Hosts {
		if h.Address == addr || h.Name == addr {
			return true
		}
	}
	return false
}

// validateAPIVIP checks a VIP that kiln is to announce: on the hosts'
// segment (inside a machine network, neither its network nor its
// broadcast address); and apiVIPManaged: true only where there is such a
// VIP to manage.
func validateAPIVIP(c *types.Config, fp *field.Path) field.ErrorList {
	s := c.Platform.SSH
	var errs field.ErrorList
	vip, managed := ManagedAPIVIP(s)
	if s.APIVIPManaged != nil && *s.APIVIPManaged && !managed {
		errs = append(errs, field.Invalid(fp.Child("apiVIPManaged"), true,
			fmt.Sprintf("needs apiVIP to be a free IPv4 address on the hosts' segment, not %q (unset, a DNS name or a host's address)", s.APIVIP)))
	}
	if !managed {
		return errs
	}
	machines := c.MachineNetworkCIDRs()
	for _, m := range machines {
		if !m.Contains(vip) {
			continue
		}
		if r := prefixRange(m); vip == r.First || vip == r.Last {
			errs = append(errs, field.Invalid(fp.Child("apiVIP"), s.APIVIP, fmt.Sprintf("is %s's network or broadcast address", m)))
		}
		return errs
	}
	return append(errs, field.Invalid(fp.Child("apiVIP"), s.APIVIP,
		"must be inside one of networking.machineNetwork ("+prefixes(machines)+") for kiln to announce it on the hosts' segment; set apiVIPManaged: false when it is your own load balancer's address"))
}
