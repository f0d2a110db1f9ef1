package main

import (
	"context"

	"github.com/kiln-project/kiln/cmd/cluster/infra"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
)

// session is --dir's cluster as a command works on it: its state, the
// provisioner of its platform and, when asked for, its API.
type session struct {
	cluster *install.Cluster
	// prov is nil only when opened withMachinesOptional on a platform
	// kiln does not provision.
	prov platforms.Provisioner
	// api is set when opened withAPI.
	api install.API
}

// sessionNeed is what openCluster opens besides the cluster's state and
// provisioner.
type sessionNeed int

const (
	// withAPI opens the cluster's Kubernetes API too.
	withAPI sessionNeed = 1 << iota
	// withMachinesOptional opens a cluster whose platform kiln does not
	// provision too, without a provisioner: its waits judge by the API
	// alone.
	withMachinesOptional
)

// openCluster loads --dir's cluster (flags override its install-config
// timeouts) with the provisioner of its platform and what needs ask for.
func (o *rootOptions) openCluster(ctx context.Context, flags install.Timeouts, needs sessionNeed) (*session, error) {
	store, err := o.openStore(nil)
	if err != nil {
		return nil, err
	}
	return o.openClusterIn(ctx, store, flags, needs)
}

// openClusterIn is openCluster through store, the one the command already
// works with.
func (o *rootOptions) openClusterIn(ctx context.Context, store *graph.Store, flags install.Timeouts, needs sessionNeed) (*session, error) {
	c, err := install.Load(ctx, store, o.dir, flags)
	if err != nil {
		return nil, err
	}
	s := &session{cluster: c}
	s.prov, err = o.provisioner(ctx, c.Config.PlatformName())
	if err != nil && needs&withMachinesOptional == 0 {
		return nil, err
	}
	if err != nil {
		o.log.Debugf("no machine states: %v", err)
		s.prov = nil
	}
	if needs&withAPI != 0 {
		if s.api, err = c.API(o.log, o.status, s.prov); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openTarget finds the cluster of --dir (or infraID, when metadata.json is
// lost) and the provisioner of its platform, for the commands that work on
// a cluster whatever its state: destroy, gather, load. FindTarget's errors
// come back unwrapped (infra.ErrNothingToDestroy).
func (o *rootOptions) openTarget(ctx context.Context, infraID string) (infra.Target, platforms.Provisioner, error) {
	t, err := infra.FindTarget(o.dir, infraID)
	if err != nil {
		return t, nil, err
	}
	prov, err := o.provisioner(ctx, t.Platform)
	return t, prov, err
}
