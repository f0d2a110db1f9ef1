package install

import (
	"errors"
	"path/filepath"

	"github.com/kiln-project/kiln/cmd/cluster/infra"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/platforms"
)

// StateCluster returns the cluster of dir's state as far as its addresses
// go - its effective install-config and infra ID - for the commands that
// only read --dir (certs check-expiration, kubectl) to build its route
// policy (Cluster.Dialer); found is false when dir's state holds no
// cluster.
func StateCluster(dir string) (c *Cluster, found bool, err error) {
	cid, ic, err := infra.Identity(dir)
	if errors.Is(err, infra.ErrNothingToDestroy) || errors.Is(err, infra.ErrNoMetadata) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, false, err
	}
	cfg, err := machineset.EffectiveConfig(abs, ic.Config)
	if err != nil {
		return nil, false, err
	}
	return &Cluster{Cluster: platforms.Cluster{Dir: abs, Config: cfg, InfraID: cid.InfraID}}, true, nil
}
