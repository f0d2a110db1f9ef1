package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Nodes is what a platform does to upgrade the components of a node. Each
// method is idempotent: a re-run after an interrupt calls it again.
type Nodes interface {
	// Apply makes change c on node: the component's new payload and
	// manifest, and the restart that runs them. Node "" is the cluster,
	// for the add-ons (KubeProxy, CoreDNS), in every method.
	Apply(ctx context.Context, node string, c Change) error
	// Check reports whether c's component runs c.To on node and is
	// healthy (an etcd member caught up, a pod Ready, a Node Ready): nil
	// when it does, else what is wrong.
	Check(ctx context.Context, node string, c Change) error
	// Rollback puts c.From back on node, as Apply would.
	Rollback(ctx context.Context, node string, c Change) error
	// Drain cordons node and evicts its pods; Uncordon undoes the cordon.
	Drain(ctx context.Context, node string) error
	Uncordon(ctx context.Context, node string) error
	// APIBackend takes master's API server out of the load balancer
	// (serve false) before it restarts, and puts it back (serve true).
	APIBackend(ctx context.Context, master string, serve bool) error
}

// DefaultStepTimeout bounds each change's health gate.
const DefaultStepTimeout = 10 * time.Minute

// waitReport is how often a gate that waits says what it waits for.
const waitReport = 30 * time.Second

// Runner carries out a plan on one cluster, recording each step in the
// journal of Dir before it begins.
type Runner struct {
	// Dir is the cluster's --dir, where the journal is kept.
	Dir   string
	Nodes Nodes
	// StepTimeout bounds each change's health gate; DefaultStepTimeout
	// when zero.
	StepTimeout time.Duration
	// RollbackTimeout bounds the gate of each change rolled back: the old
	// version must come back however short StepTimeout was;
	// DefaultStepTimeout when zero.
	RollbackTimeout time.Duration
	// Poll is how often a gate checks; a second when zero.
	Poll time.Duration
	// Out gets a line per step, with its time, and the summary.
	Out io.Writer
	// Now is the clock of the progress lines.
	Now func() time.Time
	// Finish, when set, runs after the last step, before the journal is
	// removed (Flags.Finish).
	Finish func(ctx context.Context) error
}

// StepError is a step whose change failed its health gate and was rolled
// back on its node: it names the node, the component and the last error
// the gate saw.
type StepError struct {
	Node   string
	Change Change
	Err    error
	// RollbackErr is why the rollback failed too, nil when it worked.
	RollbackErr error
}

func (e *StepError) Error() string {
	where := e.Node
	if where == "" {
		where = "add-ons"
	}
	msg := fmt.Sprintf("%s: %s %s failed: %v", where, e.Change.Component, display(e.Change.Component, e.Change.To), e.Err)
	var irr *IrreversibleError
	if errors.As(e.RollbackErr, &irr) {
		return msg + fmt.Sprintf("; it cannot be rolled back: %v. It stays at %s, and the upgrade stopped: once what fails is fixed, the same kiln upgrade cluster waits for it again and goes on",
			irr, display(e.Change.Component, e.Change.To))
	}
	if e.RollbackErr != nil {
		return msg + fmt.Sprintf("; rolling it back to %s failed too: %v", display(e.Change.Component, e.Change.From), e.RollbackErr)
	}
	return msg + fmt.Sprintf("; rolled back to %s on %s, and the upgrade stopped", display(e.Change.Component, e.Change.From), where)
}

func (e *StepError) Unwrap() error { return e.Err }

// IrreversibleError is a rollback that cannot be made: the change stays on
// its node, its step stays under way, and the next run gates it again
// instead of rolling it back.
type IrreversibleError struct {
	// Why says what makes the change one-way.
	Why string
}

func (e *IrreversibleError) Error() string { return e.Why }

// Run finishes the step j records as begun (or its rollback), then carries
// out p's steps in order, saving j before each; the end line counts the
// cluster's nodes (p.Nodes). j.To must be p's target;
// the caller took the etcd snapshot (j.Snapshot) before the first call.
func (r *Runner) Run(ctx context.Context, p *Plan, j Journal) error {
	start := r.now()
	var resumed *Step
	if j.Begun != nil {
		if err := r.resume(ctx, j); err != nil {
			return err
		}
		resumed = &j.Begun.Step
		j.Begun = nil
		if err := SaveJournal(r.Dir, j); err != nil {
			return err
		}
	}
	for i, st := range p.Steps {
		if resumed != nil && covers(*resumed, st) {
			// The plan was made before the resume finished this step.
			continue
		}
		t := r.now()
		fmt.Fprintf(r.Out, "[%d/%d] %s: %s\n", i+1, len(p.Steps), st.Where(), describe(st.Changes))
		j.Begun = &Begun{Step: st}
		if err := SaveJournal(r.Dir, j); err != nil {
			return err
		}
		if err := r.step(ctx, st, &j); err != nil {
			return err
		}
		j.Begun = nil
		if err := SaveJournal(r.Dir, j); err != nil {
			return err
		}
		fmt.Fprintf(r.Out, "[%d/%d] %s: done (%s)\n", i+1, len(p.Steps), st.Where(), r.since(t))
	}
	if r.Finish != nil {
		if err := r.Finish(ctx); err != nil {
			return err
		}
	}
	if err := RemoveJournal(r.Dir); err != nil {
		return err
	}
	fmt.Fprintf(r.Out, "Upgrade complete: %s on %s (%s)\n", p.To.Kubernetes, plural(p.Nodes, "node"), r.since(start))
	return nil
}

// resume finishes j's begun step: its rollback when one began (then the
// step is no longer under way, and the failure is reported again), else
// the step itself, every change applied again and gated.
func (r *Runner) resume(ctx context.Context, j Journal) error {
	st := j.Begun.Step
	fmt.Fprintf(r.Out, "Resuming %s: %s\n", st.Where(), describe(st.Changes))
	if j.Begun.Failed != "" {
		for _, n := range targetsOf(st) {
			err := r.rollback(ctx, n, st.Changes)
			var irr *IrreversibleError
			if errors.As(err, &irr) {
				// Killed before the run that failed found this out:
				// the step is finished instead.
				fmt.Fprintf(r.Out, "%s cannot be rolled back (%v): waiting for it again\n", n, irr)
				j.Begun.Failed = ""
				if err := SaveJournal(r.Dir, j); err != nil {
					return err
				}
				return r.step(ctx, st, &j)
			}
			if err != nil {
				return fmt.Errorf("%s: rolling back after %s: %w", n, j.Begun.Failed, err)
			}
		}
		if err := r.release(ctx, st); err != nil {
			return err
		}
		failed := j.Begun.Failed
		j.Begun = nil
		if err := SaveJournal(r.Dir, j); err != nil {
			return err
		}
		return fmt.Errorf("the upgrade stopped before: %s (rolled back)", failed)
	}
	return r.step(ctx, st, &j)
}

// step makes st's changes on each of its nodes, each gated; a change that
// fails its gate is rolled back on its node with the step's earlier ones.
func (r *Runner) step(ctx context.Context, st Step, j *Journal) error {
	if st.Drain {
		for _, n := range st.Nodes {
			if err := r.Nodes.Drain(ctx, n); err != nil {
				return fmt.Errorf("draining %s: %w", n, err)
			}
		}
	}
	for _, n := range targetsOf(st) {
		for i, c := range st.Changes {
			err := r.change(ctx, n, c)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				// Interrupted (Ctrl-C), not failed: the step stays
				// under way, for the next run to finish, as after a
				// kill.
				return err
			}
			serr := &StepError{Node: n, Change: c, Err: err}
			j.Begun.Failed = fmt.Sprintf("%s: %s %s: %v", n, c.Component, display(c.Component, c.To), err)
			if jerr := SaveJournal(r.Dir, *j); jerr != nil {
				return errors.Join(serr, jerr)
			}
			serr.RollbackErr = r.rollback(ctx, n, st.Changes[:i+1])
			var irr *IrreversibleError
			if errors.As(serr.RollbackErr, &irr) {
				// The step stays under way, not failed: the next run
				// applies and gates it again.
				j.Begun.Failed = ""
				if err := SaveJournal(r.Dir, *j); err != nil {
					return errors.Join(serr, err)
				}
				return serr
			}
			if serr.RollbackErr == nil {
				if err := r.release(ctx, st); err != nil {
					serr.RollbackErr = err
				} else {
					j.Begun = nil
					if err := SaveJournal(r.Dir, *j); err != nil {
						return errors.Join(serr, err)
					}
				}
			}
			return serr
		}
	}
	return r.release(ctx, st)
}

// drainsAPI reports whether a change of c takes its master's API server
// out of the load balancer while it restarts: the API server itself, and
// etcd, which it talks to on its own master only (--etcd-servers is the
// local member), so that it cannot write while its member restarts.
// Leaving the load balancer closes the connections pinned to it, and
// clients reconnect to another master (an e2e run without it for etcd:
// 5 writes in a row timed out, 30 s, on a connection pinned to the master
// whose member restarted).
func drainsAPI(c Component) bool { return c == KubeAPIServer || c == Etcd }

// change applies c on node and waits for its gate; an API server leaves
// the load balancer before it or its etcd member restarts, and comes back
// once the change passed its gate.
func (r *Runner) change(ctx context.Context, node string, c Change) error {
	api := drainsAPI(c.Component)
	if api {
		if err := r.Nodes.APIBackend(ctx, node, false); err != nil {
			return fmt.Errorf("taking its API server out of the load balancer: %w", err)
		}
	}
	if err := r.Nodes.Apply(ctx, node, c); err != nil {
		return err
	}
	if err := r.gate(ctx, node, c); err != nil {
		return err
	}
	if api {
		return r.Nodes.APIBackend(ctx, node, true)
	}
	return nil
}

// rollback undoes changes on node, the last first, each gated at its old
// version.
func (r *Runner) rollback(ctx context.Context, node string, changes []Change) error {
	for _, c := range slices.Backward(changes) {
		back := Change{Component: c.Component, From: c.To, To: c.From}
		if err := r.Nodes.Rollback(ctx, node, c); err != nil {
			return err
		}
		if err := r.gateWithin(ctx, node, back, r.RollbackTimeout); err != nil {
			return err
		}
		if drainsAPI(c.Component) {
			if err := r.Nodes.APIBackend(ctx, node, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// targetsOf is what st's changes are made on: each of its nodes, or the
// cluster ("") for the add-ons.
func targetsOf(st Step) []string {
	if len(st.Nodes) == 0 {
		return []string{""}
	}
	return st.Nodes
}

// release uncordons a drained step's nodes.
func (r *Runner) release(ctx context.Context, st Step) error {
	if !st.Drain {
		return nil
	}
	for _, n := range st.Nodes {
		if err := r.Nodes.Uncordon(ctx, n); err != nil {
			return fmt.Errorf("uncordoning %s: %w", n, err)
		}
	}
	return nil
}

// gate polls Check until c is healthy on node or StepTimeout passes; the
// error then is the last one Check returned.
func (r *Runner) gate(ctx context.Context, node string, c Change) error {
	return r.gateWithin(ctx, node, c, r.StepTimeout)
}

// checkTimeout bounds one check of a gate.
const checkTimeout = 30 * time.Second

// gateWithin is gate with its timeout; DefaultStepTimeout when zero. The
// timeout is the gate's, not its checks': a check never runs against the
// gate's deadline, which would make its last error one of the deadline
// ("client rate limiter Wait returned an error: rate: Wait(n=1) would
// exceed context deadline", seen in an e2e run) instead of what was
// wrong. Each check has checkTimeout of its own; the gate ends at the
// first check that passes, or at the first that fails after the timeout.
func (r *Runner) gateWithin(ctx context.Context, node string, c Change, timeout time.Duration) error {
	if timeout == 0 {
		timeout = DefaultStepTimeout
	}
	poll := r.Poll
	if poll == 0 {
		poll = time.Second
	}
	var last error
	deadline := time.Now().Add(timeout)
	began, told := r.now(), r.now()
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		last = r.Nodes.Check(cctx, node, c)
		cancel()
		if last == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			// Interrupted: not the component's failure.
			return false, ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return false, fmt.Errorf("not healthy at %s after %s: %w", display(c.Component, c.To), timeout, last)
		}
		if r.now().Sub(told) >= waitReport {
			// A long wait names what it waits for.
			told = r.now()
			fmt.Fprintf(r.Out, "      waiting %s for %s %s: %v\n", r.since(began), c.Component, display(c.Component, c.To), last)
		}
		return false, nil
	})
	return err
}

func (r *Runner) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

func (r *Runner) since(t time.Time) time.Duration { return r.now().Sub(t).Round(time.Second) }

// covers reports whether done, a finished step, made every change of st:
// the same nodes, each of st's components brought to the same version.
func covers(done, st Step) bool {
	if !slices.Equal(done.Nodes, st.Nodes) {
		return false
	}
	for _, c := range st.Changes {
		if !slices.ContainsFunc(done.Changes, func(d Change) bool { return d.Component == c.Component && d.To == c.To }) {
			return false
		}
	}
	return true
}

// describe lists a step's changes: "etcd 3.5.35 → 3.6.16".
func describe(cs []Change) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s → %s", c.Component, display(c.Component, c.From), display(c.Component, c.To))
	}
	return s
}
