package csrapprover

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// DenyList is what no kubelet serving certificate may name, whatever the
// machine inventory says: defence in depth against an inventory that is
// wrong (edited by hand, or a bug). Its fields come from the approver's
// --deny-* flags, which kiln renders from the install-config. Besides
// them Decide always refuses loopback, unspecified, link-local and
// multicast addresses, "localhost", wildcard names, and the API's
// in-cluster names: "kubernetes", "kubernetes.default" and every name
// under it, and every name ending in ".svc" or holding ".svc.".
type DenyList struct {
	// Names are refused exactly (case-insensitive): the API's names.
	Names []string
	// Domains are refused with every name under them: the cluster's DNS
	// domain.
	Domains []string
	// Addrs are refused: the API VIP.
	Addrs []netip.Addr
	// Networks are refused with every address in them: the Service and
	// pod networks.
	Networks []netip.Prefix
}

// NewDenyList builds a DenyList from flag values; every value that does
// not parse is reported.
func NewDenyList(names, domains, addrs, networks []string) (DenyList, error) {
	d := DenyList{}
	var errs []error
	for _, n := range names {
		d.Names = append(d.Names, strings.ToLower(strings.TrimSuffix(n, ".")))
	}
	for _, n := range domains {
		d.Domains = append(d.Domains, strings.ToLower(strings.Trim(n, ".")))
	}
	for _, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--deny-ip %q: not an IP address", s))
			continue
		}
		d.Addrs = append(d.Addrs, a.Unmap())
	}
	for _, s := range networks {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--deny-cidr %q: not a CIDR block", s))
			continue
		}
		d.Networks = append(d.Networks, p.Masked())
	}
	return d, errors.Join(errs...)
}

// check returns why one of req's SANs is refused, or nil.
func (d DenyList) check(req *x509.CertificateRequest) error {
	for _, n := range req.DNSNames {
		if why := d.name(n); why != "" {
			return fmt.Errorf("DNS SAN %s is never approved: %s", n, why)
		}
	}
	for _, ip := range req.IPAddresses {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return fmt.Errorf("IP SAN %v is not an IP address", ip)
		}
		if why := d.addr(a.Unmap()); why != "" {
			return fmt.Errorf("IP SAN %s is never approved: %s", ip, why)
		}
	}
	return nil
}

// name says why the DNS name n is refused; "" when it is not.
func (d DenyList) name(n string) string {
	n = strings.ToLower(strings.TrimSuffix(n, "."))
	switch {
	case strings.Contains(n, "*"):
		return "a wildcard"
	case n == "localhost" || strings.HasSuffix(n, ".localhost"):
		return "localhost"
	case n == "kubernetes" || n == "kubernetes.default" || strings.HasPrefix(n, "kubernetes.default."):
		return "an in-cluster name of the API"
	case strings.HasSuffix(n, ".svc") || strings.Contains(n, ".svc."):
		return "a Service name"
	}
	for _, x := range d.Names {
		if n == x {
			return "a name of the API (--deny-name)"
		}
	}
	for _, dom := range d.Domains {
		if n == dom || strings.HasSuffix(n, "."+dom) {
			return "in the cluster's domain " + dom + " (--deny-domain)"
		}
	}
	return ""
}

// addr says why the address a is refused; "" when it is not.
func (d DenyList) addr(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	}
	for _, x := range d.Addrs {
		if a == x {
			return "the API's address (--deny-ip)"
		}
	}
	for _, p := range d.Networks {
		if p.Contains(a) {
			return "in " + p.String() + " (--deny-cidr)"
		}
	}
	return ""
}
