package provision

import (
	"fmt"
	"net/netip"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

var (
	_ platforms.Router      = (*Provisioner)(nil)
	_ platforms.APIStandIns = (*Provisioner)(nil)
)

// DialPolicy implements platforms.Router: the cluster's addresses are the
// user's hosts, reached through the user's own routes, so kiln dials what
// install-config declares and nothing else - each host's address, and the
// API VIP (an address, or a name the user's DNS resolves; with none, the
// API name of the admin kubeconfig) - never an address that a node
// reports about itself. The hosts are read from c at each check, so a
// host that a scale adds (to c.Config) is dialed once it is declared.
func (p *Provisioner) DialPolicy(c *platforms.Cluster) (netroute.Policy, error) {
	if _, err := declared(c.Config); err != nil {
		return nil, err
	}
	return netroute.PolicyFunc(func(addr netip.Addr) error {
		only, err := declared(c.Config)
		if err != nil {
			return err
		}
		return only.Check(addr)
	}), nil
}

// declared returns the addresses and names cfg declares for its cluster.
func declared(cfg *types.Config) (netroute.Only, error) {
	s := cfg.Platform.SSH
	if s == nil {
		return netroute.Only{}, fmt.Errorf("install-config has no ssh platform section")
	}
	var only netroute.Only
	for i, h := range s.Hosts {
		a, err := netip.ParseAddr(h.Address)
		if err != nil {
			return netroute.Only{}, fmt.Errorf("platform.ssh.hosts[%d].address: %w", i, err)
		}
		only.Addrs = append(only.Addrs, a)
	}
	switch a, err := netip.ParseAddr(s.APIVIP); {
	case err == nil:
		only.Addrs = append(only.Addrs, a)
	case s.APIVIP != "":
		only.Names = append(only.Names, s.APIVIP)
	default:
		only.Names = append(only.Names, cfg.APIName())
	}
	return only, nil
}

// APIStandIns implements platforms.APIStandIns: for the API VIP that kiln
// keeps (sshconfig.ManagedAPIVIP), the masters' addresses as install-config
// declares them at the call (a master that a scale replaced is gone from
// them); nil for any other address.
func (p *Provisioner) APIStandIns(c *platforms.Cluster, addr netip.Addr) []netip.Addr {
	s := c.Config.Platform.SSH
	vip, ok := sshconfig.ManagedAPIVIP(s)
	if !ok || vip != addr {
		return nil
	}
	var masters []netip.Addr
	for _, h := range s.Hosts {
		if a, err := netip.ParseAddr(h.Address); err == nil && h.Role == ssh.RoleMaster {
			masters = append(masters, a)
		}
	}
	return masters
}
