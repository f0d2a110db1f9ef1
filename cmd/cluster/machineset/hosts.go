package machineset

import (
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// LoadHosts reads dir's hosts record; found is false when there is none.
func LoadHosts(dir string) (hosts []ssh.Host, found bool, err error) {
	found, err = graph.LoadRecord(dir, installdir.Hosts, &hosts)
	return hosts, found, err
}

// SaveHosts writes dir's hosts record atomically, following no symbolic
// link in dir.
func SaveHosts(dir string, hosts []ssh.Host) error {
	return graph.SaveRecord(dir, installdir.Hosts, hosts)
}

// EffectiveConfig returns the install-config c of the cluster in dir with
// dir's hosts record applied (sshconfig.WithHosts), or c itself when there is none.
func EffectiveConfig(dir string, c *types.Config) (*types.Config, error) {
	if c.Platform.SSH == nil {
		return c, nil
	}
	hosts, found, err := LoadHosts(dir)
	if err != nil || !found {
		return c, err
	}
	return sshconfig.WithHosts(c, hosts), nil
}
