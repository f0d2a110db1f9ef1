package sshconfig

import (
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// WithHosts returns a copy of c, an install-config of the ssh platform,
// with hosts as its platform.ssh.hosts and the replica counts theirs
// (controlPlane.replicas the master hosts; the first compute pool the
// worker hosts, the bootstrap host among them when it joins as a worker;
// any other pool none), so that it validates as it did. c
// is not changed.
func WithHosts(c *types.Config, hosts []ssh.Host) *types.Config {
	out := *c
	s := *c.Platform.SSH
	s.Hosts = append([]ssh.Host(nil), hosts...)
	out.Platform.SSH = &s
	var masters, workers int64
	for _, h := range hosts {
		switch {
		case h.Role == ssh.RoleMaster:
			masters++
		case h.Worker():
			workers++
		}
	}
	if c.ControlPlane != nil {
		cp := *c.ControlPlane
		cp.Replicas = &masters
		out.ControlPlane = &cp
	}
	out.Compute = append([]types.MachinePool(nil), c.Compute...)
	for i := range out.Compute {
		n := int64(0)
		if i == 0 {
			n = workers
		}
		out.Compute[i].Replicas = &n
	}
	return &out
}
