package sshconfig

import (
	"net"
	"slices"
	"strconv"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// APIVIP implements configs.APIAddresser: platform.ssh.apiVIP.
func (Config) APIVIP(c *types.Config) string {
	if c.Platform.SSH == nil {
		return ""
	}
	return c.Platform.SSH.APIVIP
}

// APIVIPIsMachine implements configs.MachineAPIAddresser: apiVIP is a
// host's own address (a master's, where no load balancer stands before
// the masters), or its name.
func (Config) APIVIPIsMachine(c *types.Config) bool {
	if c.Platform.SSH == nil || c.Platform.SSH.APIVIP == "" {
		return false
	}
	return hostAddress(c.Platform.SSH, c.Platform.SSH.APIVIP)
}

// NodeProxy implements configs.NodeProxier: every host runs a proxy to the
// masters' API and machine-config servers on its loopback interface.
func (Config) NodeProxy(*types.Config) (api, machineConfig string) {
	return net.JoinHostPort("localhost", strconv.Itoa(ssh.APIProxyPort)),
		net.JoinHostPort("localhost", strconv.Itoa(ssh.MachineConfigProxyPort))
}

// BootstrapJoinsAsWorker implements configs.BootstrapWorker: the bootstrap
// host with joinAsWorker.
func (Config) BootstrapJoinsAsWorker(c *types.Config) bool {
	if c.Platform.SSH == nil {
		return false
	}
	for _, h := range c.Platform.SSH.Hosts {
		if h.Role == ssh.RoleBootstrap && h.Worker() {
			return true
		}
	}
	return false
}

// Addons implements configs.AddonProvider: storage and metrics-server,
// each unless platform.ssh.addons switches it off, and MetalLB when
// platform.ssh.loadBalancerIPs has addresses (LoadBalancer Services) or
// kiln manages apiVIP (ManagedAPIVIP); none without a section.
func (Config) Addons(c *types.Config) types.Addons {
	if c.Platform.SSH == nil {
		return types.Addons{}
	}
	a := c.Platform.SSH.Addons
	if a == nil {
		a = &ssh.Addons{}
	}
	add := types.Addons{Storage: types.AddonOn(a.Storage), Metrics: types.AddonOn(a.Metrics), LoadBalancerIPs: slices.Clone(c.Platform.SSH.LoadBalancerIPs)}
	add.LoadBalancer = len(add.LoadBalancerIPs) > 0
	if vip, ok := ManagedAPIVIP(c.Platform.SSH); ok {
		add.APIVIP = vip.String()
	}
	return add
}

// ImageRegistry implements configs.AddonProvider: an ssh cluster has no
// image registry add-on (local's runs on kiln's host).
func (Config) ImageRegistry(*types.Config) (types.ImageRegistry, bool) {
	return types.ImageRegistry{}, false
}
