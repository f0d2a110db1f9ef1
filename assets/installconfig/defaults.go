package installconfig

import (
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/release"
)

// Defaults of install-config fields, applied by SetDefaults.
const (
	// DefaultNetworkType is the pod network: a CNI bridge on each node and
	// one route per node pod CIDR between nodes.
	DefaultNetworkType = types.NetworkTypeKilnBridge
	// DefaultEgress lets pods and machines reach what the host reaches.
	DefaultEgress = types.EgressNAT
	// DefaultClusterNetwork is the pod address block.
	DefaultClusterNetwork = "10.128.0.0/14"
	// DefaultHostPrefix gives each node a /23 (510 pod addresses).
	DefaultHostPrefix = 23
	// DefaultServiceNetwork is the Service ClusterIP block.
	DefaultServiceNetwork = "172.30.0.0/16"
	// DefaultMachineNetwork is used when the platform sets none.
	DefaultMachineNetwork = "10.0.0.0/16"
	// DefaultControlPlaneReplicas is an etcd cluster that survives one loss.
	DefaultControlPlaneReplicas = 3
	// DefaultComputeReplicas is the number of workers in the default pool.
	DefaultComputeReplicas = 1
	// ControlPlanePoolName is the name of the control-plane pool.
	ControlPlanePoolName = "master"
	// ComputePoolName is the name of the compute pool.
	ComputePoolName = "worker"
)

// SetDefaults fills every unset field of c. The selected platform (found in
// plats by name) sets its own section and the machine network first.
func SetDefaults(c *types.Config, plats []configs.Platform) {
	if c.ControlPlane == nil {
		c.ControlPlane = &types.MachinePool{}
	}
	defaultPool(c.ControlPlane, ControlPlanePoolName, DefaultControlPlaneReplicas)
	if c.Compute == nil {
		c.Compute = []types.MachinePool{{}}
	}
	for i := range c.Compute {
		defaultPool(&c.Compute[i], ComputePoolName, DefaultComputeReplicas)
	}
	if c.Networking == nil {
		c.Networking = &types.Networking{}
	}
	n := c.Networking
	if n.NetworkType == "" {
		n.NetworkType = DefaultNetworkType
	}
	setIfEmpty(&n.Egress, DefaultEgress)
	if len(n.ClusterNetwork) == 0 {
		n.ClusterNetwork = []types.ClusterNetworkEntry{{CIDR: DefaultClusterNetwork}}
	}
	for i := range n.ClusterNetwork {
		if n.ClusterNetwork[i].HostPrefix == 0 {
			n.ClusterNetwork[i].HostPrefix = DefaultHostPrefix
		}
	}
	if len(n.ServiceNetwork) == 0 {
		n.ServiceNetwork = []string{DefaultServiceNetwork}
	}
	if p := lookup(plats, c.PlatformName()); p != nil {
		p.SetDefaults(c)
	}
	if len(n.MachineNetwork) == 0 {
		n.MachineNetwork = []types.MachineNetworkEntry{{CIDR: DefaultMachineNetwork}}
	}
	setIfEmpty(&c.ControlPlaneHardwareSpeed, types.HardwareSpeedStandard)
	setIfEmpty(&c.KubernetesVersion, release.Default().Kubernetes)
	if r, err := release.Lookup(c.KubernetesVersion); err == nil {
		c.KubernetesVersion = r.Kubernetes // "1.35.4" -> "v1.35.4"
	}
	if c.Timeouts == nil {
		c.Timeouts = &types.Timeouts{}
	}
	setIfEmpty(&c.Timeouts.Bootstrap, types.DefaultBootstrapTimeout)
	setIfEmpty(&c.Timeouts.Install, types.DefaultInstallTimeout)
	setIfEmpty(&c.Timeouts.API, types.DefaultAPITimeout)
}

func defaultPool(p *types.MachinePool, name string, replicas int64) {
	if p.Name == "" {
		p.Name = name
	}
	if p.Replicas == nil {
		p.Replicas = &replicas
	}
}

func setIfEmpty(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

// lookup returns the platform called name, or nil.
func lookup(plats []configs.Platform, name string) configs.Platform {
	for _, p := range plats {
		if p.Name() == name {
			return p
		}
	}
	return nil
}
