package install

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
)

// Phase is one step of an install, as k0sctl's phases: small, titled and
// safe to run again.
type Phase interface {
	// Title names the phase in the debug log.
	Title() string
	// Kind is how a failure of the phase is reported: the process exit
	// code (docs/exit-codes.md). Libraries do not classify their errors:
	// they return errors that say what went wrong, the phase that called
	// them says which kind its failure is, and exitcode.Of maps both to
	// the code, once (a *platforms.ConfigError is bad input whichever
	// phase met it).
	Kind() exitcode.Kind
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
				return exitcode.With(p.Kind(), err)
			}
			if !run {
				log.Debugf("phase: %s: skipped", p.Title())
				continue
			}
		}
		log.Debugf("phase: %s", p.Title())
		if err := p.Run(ctx); err != nil {
			return exitcode.With(p.Kind(), err)
		}
	}
	return nil
}
