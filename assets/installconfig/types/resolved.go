package types

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kiln-project/kiln/assets/release"
)

// The defaults of timeouts, as install-config writes them.
const (
	// DefaultAPITimeout bounds the wait for the API to answer.
	DefaultAPITimeout = "20m"
	// DefaultBootstrapTimeout bounds the wait for bootstrap-complete.
	DefaultBootstrapTimeout = "30m"
	// DefaultInstallTimeout bounds the wait for install-complete.
	DefaultInstallTimeout = "30m"
)

// The lifetimes pki.leafValidity may take.
const (
	// DefaultLeafValidity is the lifetime of the leaf certificates kiln
	// issues when pki.leafValidity is unset: 1 year, as kubeadm's.
	DefaultLeafValidity = 365 * 24 * time.Hour
	// MinLeafValidity is the shortest pki.leafValidity: a week leaves room
	// to renew (and to notice a failed renewal) before the API stops.
	MinLeafValidity = 7 * 24 * time.Hour
	// MinTestLeafValidity is the shortest pki.leafValidity with
	// pki.allowShortLeafValidityForTests.
	MinTestLeafValidity = 2 * time.Minute
	// DefaultRenewBefore is pki.renewBefore when unset and a third of
	// leafValidity is longer: 30 days, as OpenShift and cert-manager
	// renew.
	DefaultRenewBefore = 30 * 24 * time.Hour
	// MinRenewBefore is the shortest pki.renewBefore: the masters look
	// at their certificates at least every hour.
	MinRenewBefore = time.Hour
	// MinTestRenewBefore is the shortest pki.renewBefore with
	// pki.allowShortLeafValidityForTests.
	MinTestRenewBefore = time.Minute
)

// The archives backup.keep may keep on each master.
const (
	// DefaultBackupKeep is backup.keep when unset.
	DefaultBackupKeep = 7
	// MaxBackupKeep is the most backup.keep may keep.
	MaxBackupKeep = 100
)

// Resolved is an install-config's values resolved once, typed, after
// defaulting and validation: what the install run and the provisioners
// read instead of parsing Config's strings again.
type Resolved struct {
	// Release is the release kubernetesVersion names.
	Release release.Release
	// MachineNetwork is networking.machineNetwork[0].
	MachineNetwork netip.Prefix
	// ClusterNetworks are networking.clusterNetwork's CIDRs.
	ClusterNetworks []netip.Prefix
	// ServiceNetwork is networking.serviceNetwork[0].
	ServiceNetwork netip.Prefix
	// Timeouts are timeouts.*, their defaults where unset.
	Timeouts ResolvedTimeouts
	// LeafValidity is pki.leafValidity, DefaultLeafValidity when unset.
	LeafValidity time.Duration
	// AutomaticRenewal is pki.renewal Automatic (the default).
	AutomaticRenewal bool
	// RenewBefore is pki.renewBefore, or the lesser of
	// DefaultRenewBefore and a third of LeafValidity when unset.
	RenewBefore time.Duration
	// Egress is networking.egress; the cluster of an install-config
	// without one, written before the field existed, is sealed
	// (EgressNone), as it was created.
	Egress string
}

// NAT reports whether pods and machines reach outside the cluster
// (networking.egress: NAT).
func (r Resolved) NAT() bool { return r.Egress == EgressNAT }

// dnsServiceIndex is the offset of the cluster DNS Service IP in the service
// network, as kubeadm chooses it (x.y.z.10).
const dnsServiceIndex = 10

// FirstServiceIP is the ClusterIP of the kubernetes Service: the first host
// address of the service network.
func (r Resolved) FirstServiceIP() netip.Addr {
	return nthAddr(r.ServiceNetwork, 1)
}

// DNSServiceIP is the ClusterIP of the cluster DNS Service: the tenth
// address of the service network, as kubeadm chooses it.
func (r Resolved) DNSServiceIP() netip.Addr {
	return nthAddr(r.ServiceNetwork, dnsServiceIndex)
}

// nthAddr returns the n-th address of p (0 is the network address), or the
// zero Addr when p is invalid or too small.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	if !p.IsValid() {
		return netip.Addr{}
	}
	a := p.Addr()
	for range n {
		a = a.Next()
		if !p.Contains(a) {
			return netip.Addr{}
		}
	}
	return a
}

// ResolvedTimeouts bound the waits of create cluster.
type ResolvedTimeouts struct {
	API, Bootstrap, Install time.Duration
}

// lookupRelease returns the release kubernetesVersion names, set by
// defaulting; an error naming the field when it names none or one this
// kiln does not pin (a cluster created by another kiln), never a release
// it did not ask for.
func (c *Config) lookupRelease() (release.Release, error) {
	r, err := release.Lookup(c.KubernetesVersion)
	if err != nil {
		return release.Release{}, fmt.Errorf("install-config.yaml: kubernetesVersion: %w", err)
	}
	return r, nil
}

// egress is networking.egress, EgressNone when unset: defaulting sets it,
// so only an install-config written before the field existed has none.
func (c *Config) egress() string {
	if c.Networking == nil || c.Networking.Egress == "" {
		return EgressNone
	}
	return c.Networking.Egress
}

// Resolve resolves c, which defaulting filled and validation accepted;
// the error names every field that does not resolve.
func (c *Config) Resolve() (Resolved, error) {
	var r Resolved
	var errs []error
	rel, err := c.lookupRelease()
	if err != nil {
		errs = append(errs, err)
	}
	r.Release = rel
	prefix := func(field, s string) netip.Prefix {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("install-config.yaml: %s: %w", field, err))
		}
		return p.Masked()
	}
	if n := c.Networking; n == nil || len(n.MachineNetwork) == 0 || len(n.ServiceNetwork) == 0 || len(n.ClusterNetwork) == 0 {
		errs = append(errs, errors.New("install-config.yaml: networking: a machine, service and cluster network are set by defaulting"))
	} else {
		r.MachineNetwork = prefix("networking.machineNetwork[0].cidr", n.MachineNetwork[0].CIDR)
		r.ServiceNetwork = prefix("networking.serviceNetwork[0]", n.ServiceNetwork[0])
		for i, e := range n.ClusterNetwork {
			r.ClusterNetworks = append(r.ClusterNetworks, prefix(fmt.Sprintf("networking.clusterNetwork[%d].cidr", i), e.CIDR))
		}
	}
	switch e := c.egress(); e {
	case EgressNAT, EgressNone:
		r.Egress = e
	default:
		errs = append(errs, fmt.Errorf("install-config.yaml: networking.egress: %q is neither %s nor %s", e, EgressNAT, EgressNone))
	}
	t := Timeouts{}
	if c.Timeouts != nil {
		t = *c.Timeouts
	}
	for _, f := range []struct {
		field, value, def string
		dst               *time.Duration
	}{
		{"timeouts.api", t.API, DefaultAPITimeout, &r.Timeouts.API},
		{"timeouts.bootstrap", t.Bootstrap, DefaultBootstrapTimeout, &r.Timeouts.Bootstrap},
		{"timeouts.install", t.Install, DefaultInstallTimeout, &r.Timeouts.Install},
	} {
		v := f.value
		if v == "" {
			v = f.def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("install-config.yaml: %s: %w", f.field, err))
		}
		*f.dst = d
	}
	r.LeafValidity = DefaultLeafValidity
	if c.PKI != nil && c.PKI.LeafValidity != "" {
		d, err := time.ParseDuration(c.PKI.LeafValidity)
		if err != nil {
			errs = append(errs, fmt.Errorf("install-config.yaml: pki.leafValidity: %w", err))
		}
		r.LeafValidity = d
	}
	r.AutomaticRenewal = c.PKI == nil || c.PKI.Renewal != RenewalManual
	r.RenewBefore = min(DefaultRenewBefore, r.LeafValidity/3)
	if c.PKI != nil && c.PKI.RenewBefore != "" {
		d, err := time.ParseDuration(c.PKI.RenewBefore)
		if err != nil {
			errs = append(errs, fmt.Errorf("install-config.yaml: pki.renewBefore: %w", err))
		}
		r.RenewBefore = d
	}
	return r, errors.Join(errs...)
}
