package install

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
)

// Phase is one step of an install, as k0sctl's phases: small, titled and
// safe to run again.
type Phase interface {
	// Title names the phase in the debug log.
	Title() string
	// Kind is how a failure of the phase is reported: the process exit
	// code (docs/exit-codes.md). Libraries do not classify their errors;
	// the phase that called them does.
	Kind() graph.Kind
	// Run performs the phase.
	Run(ctx context.Context) error
}

// Conditional is a Phase that may have nothing to do, such as the
// bootstrap credential check of a create resumed after bootstrap-complete.
type Conditional interface {
	Phase
	// ShouldRun reports whether the phase runs.
	ShouldRun(ctx context.Context) (bool, error)
}

// Run runs phases in order and stops at the first error, which it reports
// as the failing phase's kind.
func Run(ctx context.Context, log logrus.FieldLogger, phases []Phase) error {
	for _, p := range phases {
		if c, ok := p.(Conditional); ok {
			run, err := c.ShouldRun(ctx)
			if err != nil {
				return classify(p.Kind(), err)
			}
			if !run {
				log.Debugf("phase: %s: skipped", p.Title())
				continue
			}
		}
		log.Debugf("phase: %s", p.Title())
		if err := p.Run(ctx); err != nil {
			return classify(p.Kind(), err)
		}
	}
	return nil
}

// classify reports err as a failure of kind, unless it is the user's to
// fix: an install-config problem that only a provisioner found
// (platforms.ConfigError) is bad input whichever phase met it.
func classify(kind graph.Kind, err error) error {
	if err == nil {
		return nil
	}
	if ce := (*platforms.ConfigError)(nil); errors.As(err, &ce) {
		kind = graph.KindInput
	}
	return graph.WithKind(kind, err)
}
