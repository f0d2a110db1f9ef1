package types

import (
	"net/netip"

	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// ClusterDomain is <metadata.name>.<baseDomain>.
func (c *Config) ClusterDomain() string {
	return c.Metadata.Name + "." + c.BaseDomain
}

// APIName is the external API host name, api.<clusterDomain>.
func (c *Config) APIName() string { return "api." + c.ClusterDomain() }

// APIIntName is the internal API host name, api-int.<clusterDomain>.
func (c *Config) APIIntName() string { return "api-int." + c.ClusterDomain() }

// MachineNetworkCIDRs are the machine address blocks; invalid entries are
// skipped (validation rejects them).
func (c *Config) MachineNetworkCIDRs() []netip.Prefix {
	if c.Networking == nil {
		return nil
	}
	var out []netip.Prefix
	for _, e := range c.Networking.MachineNetwork {
		if p, err := netip.ParsePrefix(e.CIDR); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// MasterReplicas is controlPlane.replicas (0 when unset).
func (c *Config) MasterReplicas() int {
	if c.ControlPlane == nil || c.ControlPlane.Replicas == nil {
		return 0
	}
	return int(*c.ControlPlane.Replicas)
}

// WorkerReplicas is the sum of the compute pools' replicas.
func (c *Config) WorkerReplicas() int {
	n := 0
	for _, p := range c.Compute {
		if p.Replicas != nil {
			n += int(*p.Replicas)
		}
	}
	return n
}

// PlatformName is the key of the one platform section that is set, or ""
// when none or several are (validation rejects both).
func (c *Config) PlatformName() string {
	if names := c.Platform.Names(); len(names) == 1 {
		return names[0]
	}
	return ""
}

// Names lists the keys of the platform sections that are set.
func (p *Platform) Names() []string {
	var names []string
	if p.Local != nil {
		names = append(names, local.Name)
	}
	if p.None != nil {
		names = append(names, none.Name)
	}
	if p.SSH != nil {
		names = append(names, ssh.Name)
	}
	return names
}

// Names lists the keys of the platform sections set in a machine pool.
func (p *MachinePoolPlatform) Names() []string {
	if p.Local != nil {
		return []string{local.Name}
	}
	return nil
}

// Addons are the add-ons a cluster gets, after defaulting.
type Addons struct {
	// Storage is the default StorageClass (local-path-provisioner).
	Storage bool
	// Metrics is metrics-server.
	Metrics bool
	// LoadBalancer gives LoadBalancer Services addresses: on local, kiln's
	// controller on the host; on ssh, MetalLB in the cluster.
	LoadBalancer bool
	// LoadBalancerIPs are the in-cluster LoadBalancer's (MetalLB's) address
	// ranges, "first-last" or CIDRs; empty where the platform serves
	// LoadBalancer Services from outside the cluster (local) or not at all.
	LoadBalancerIPs []string
	// APIVIP is the API's virtual IP that MetalLB announces from a master
	// whose API server is ready (ssh's apiVIP when kiln manages it); ""
	// where the platform or the user keeps the API's address.
	APIVIP string
	// Registry is the image registry on the host.
	Registry bool
}

// MetalLB reports whether MetalLB runs in the cluster: the platform gave
// it addresses (LoadBalancerIPs) or an API VIP to announce.
func (a Addons) MetalLB() bool { return len(a.LoadBalancerIPs) > 0 || a.APIVIP != "" }

// AddonOn reports whether an add-on switch of install-config is on: every
// add-on is installed unless its switch is set to false.
func AddonOn(b *bool) bool { return b == nil || *b }

// SlowerControlPlane reports whether controlPlaneHardwareSpeed is Slower.
func (c *Config) SlowerControlPlane() bool {
	return c.ControlPlaneHardwareSpeed == HardwareSpeedSlower
}
