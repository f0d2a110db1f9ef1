package provision

import (
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

var _ platforms.Router = (*Provisioner)(nil)

// DialPolicy implements platforms.Router: every address of a local cluster
// (the API VIP and registry on the host's bridge address, the machines,
// LoadBalancer Service addresses) is reached through its bridge, and only
// while the bridge is there. Before `create` makes it, and after a host
// reboot or `destroy` removed it, a dial would leave through the host's
// default route instead: it is refused, and nothing is sent.
func (p *Provisioner) DialPolicy(c *platforms.Cluster) (netroute.Policy, error) {
	return netroute.Through{Interface: bridgeOf(c.Config, c.InfraID)}, nil
}
