package tls

import (
	"context"
	"time"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.Introduced = (*Lifetimes)(nil)

// Lifetimes are the lifetimes of the certificates kiln issues that outlive
// the bootstrap machine, from install-config's pki.leafValidity. Every leaf
// certificate depends on it; a --dir made before it existed holds leaves of
// the default lifetime, which it keeps (graph.Introduced).
type Lifetimes struct {
	// Leaf is the lifetime of serving and client certificates.
	Leaf time.Duration `json:"leaf"`
}

// ID implements graph.Asset.
func (*Lifetimes) ID() string { return "tls/lifetimes" }

// Name implements graph.Asset.
func (*Lifetimes) Name() string { return "certificate lifetimes" }

// Dependencies implements graph.Asset.
func (*Lifetimes) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}}
}

// Generate reads pki.leafValidity.
func (l *Lifetimes) Generate(_ context.Context, p graph.Parents) error {
	ic := &installconfig.InstallConfig{}
	if err := p.Get(ic); err != nil {
		return err
	}
	res, err := ic.Resolved()
	if err != nil {
		return err
	}
	l.Leaf = res.LeafValidity
	return nil
}

// Default implements graph.Introduced: leaves made before Lifetimes
// existed were issued for LeafValidity.
func (l *Lifetimes) Default() bool { return l.Leaf == LeafValidity }

// StateReader reads an asset's value from a state file; *graph.Store is
// one.
type StateReader interface {
	FromState(a graph.Asset) (found bool, err error)
}

// LeafValidityOf returns the leaf lifetime of the cluster whose state s
// reads: LeafValidity when the state predates Lifetimes.
func LeafValidityOf(s StateReader) (time.Duration, error) {
	l := &Lifetimes{}
	found, err := s.FromState(l)
	if err != nil || !found {
		return LeafValidity, err
	}
	return l.Leaf, nil
}
