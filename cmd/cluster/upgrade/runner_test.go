package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/installdir"
)

// killed is what fakeNodes panics with to stop a run where a kill -9 would.
type killed struct{}

// fakeNodes is a cluster whose components change when asked: it records
// every call, keeps the load balancer's backends and the cordons, and
// checks that no two API servers are ever out of the load balancer.
type fakeNodes struct {
	t     *testing.T
	state State
	calls []string
	out   map[string]bool // masters out of the load balancer
	// broken: a (node, component) whose new version never turns healthy.
	broken map[string]Component
	// oneWay: a (node, component) whose rollback is an
	// *IrreversibleError.
	oneWay map[string]Component
	// killAt panics with killed at this call that changes something
	// (counted from 1); 0 never.
	killAt, n int
	// slow is how many checks after each Apply or Rollback say the
	// component is still starting.
	slow, starting int
	// hurried: a check with less than this left before its context's
	// deadline fails as client-go's rate limiter does then.
	hurried time.Duration
}

func newFakeNodes(t *testing.T, s State) *fakeNodes {
	return &fakeNodes{t: t, state: s.clone(), out: map[string]bool{}, broken: map[string]Component{}, oneWay: map[string]Component{}}
}

// call records a call; every one but a check (read-only, and as many as
// the gate's polls happen to be) is a kill point, counted in n.
func (f *fakeNodes) call(format string, args ...any) {
	if !strings.HasPrefix(format, "check") {
		f.n++
		if f.killAt > 0 && f.n == f.killAt {
			panic(killed{})
		}
	}
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeNodes) versions(node string) map[Component]release.Version {
	if node == "" {
		return f.state.Addons
	}
	return f.state.node(node).Versions
}

func (f *fakeNodes) Apply(_ context.Context, node string, c Change) error {
	f.call("apply %s %s %s", node, c.Component, display(c.Component, c.To))
	f.versions(node)[c.Component] = c.To
	f.starting = f.slow
	return nil
}

func (f *fakeNodes) Check(ctx context.Context, node string, c Change) error {
	f.call("check %s %s %s", node, c.Component, display(c.Component, c.To))
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < f.hurried {
		return errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	}
	if f.versions(node)[c.Component] != c.To {
		return fmt.Errorf("runs %s", display(c.Component, f.versions(node)[c.Component]))
	}
	if f.starting > 0 {
		f.starting--
		return errors.New("starting")
	}
	if b, ok := f.broken[node]; ok && b == c.Component && c.To == targets(to136)[c.Component] {
		return errors.New("CrashLoopBackOff: unknown flag --broken")
	}
	return nil
}

func (f *fakeNodes) Rollback(_ context.Context, node string, c Change) error {
	f.call("rollback %s %s %s", node, c.Component, display(c.Component, c.From))
	if w, ok := f.oneWay[node]; ok && w == c.Component {
		return &IrreversibleError{Why: "one way"}
	}
	f.versions(node)[c.Component] = c.From
	f.starting = f.slow
	return nil
}

func (f *fakeNodes) Drain(_ context.Context, node string) error {
	f.call("drain %s", node)
	return nil
}

func (f *fakeNodes) Uncordon(_ context.Context, node string) error {
	f.call("uncordon %s", node)
	return nil
}

func (f *fakeNodes) APIBackend(_ context.Context, master string, serve bool) error {
	f.call("backend %s %v", master, serve)
	if serve {
		delete(f.out, master)
		return nil
	}
	f.out[master] = true
	if len(f.out) > 1 {
		f.t.Errorf("two API servers out of the load balancer at once: %v", f.out)
	}
	return nil
}

func newRunner(dir string, f *fakeNodes, out *bytes.Buffer) *Runner {
	tick := time.Unix(0, 0)
	return &Runner{Dir: dir, Nodes: f, StepTimeout: 20 * time.Millisecond, Poll: time.Millisecond, Out: out,
		Now: func() time.Time { tick = tick.Add(time.Second); return tick }}
}

func mustPlan(t *testing.T, s State) *Plan {
	t.Helper()
	p, err := MakePlan(s, to136, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunCallsInOrder(t *testing.T) {
	s := cluster(1, 1, "v1.35.4", "3.5.35")
	f := newFakeNodes(t, s)
	var out bytes.Buffer
	dir := t.TempDir()
	if err := newRunner(dir, f, &out).Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"backend master-0 false", "apply master-0 etcd 3.6.16", "check master-0 etcd 3.6.16", "backend master-0 true",
		"backend master-0 false", "apply master-0 kube-apiserver v1.36.3", "check master-0 kube-apiserver v1.36.3", "backend master-0 true",
		"apply master-0 kube-controller-manager v1.36.3", "check master-0 kube-controller-manager v1.36.3",
		"apply master-0 kube-scheduler v1.36.3", "check master-0 kube-scheduler v1.36.3",
		"drain master-0", "apply master-0 kubelet v1.36.3", "check master-0 kubelet v1.36.3", "uncordon master-0",
		"drain worker-0", "apply worker-0 kubelet v1.36.3", "check worker-0 kubelet v1.36.3", "uncordon worker-0",
		"apply  kube-proxy v1.36.3", "check  kube-proxy v1.36.3",
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls:\n got %q\nwant %q", f.calls, want)
	}
	if !strings.Contains(out.String(), "Upgrade complete: v1.36.3 on 2 nodes (") {
		t.Errorf("no summary line:\n%s", out.String())
	}
	if !regexp.MustCompile(`\[1/5\] master-0: etcd 3\.5\.35 → 3\.6\.16\n\[1/5\] master-0: done \(\d+s\)`).MatchString(out.String()) {
		t.Errorf("no progress lines with their time:\n%s", out.String())
	}
	if _, found, _ := LoadJournal(dir); found {
		t.Error("the journal outlived a complete upgrade")
	}
}

// failedRun runs the upgrade of s to to136 on f in a new directory, which
// it returns with the run's error, a *StepError.
func failedRun(t *testing.T, f *fakeNodes, s State, out *bytes.Buffer) (string, error) {
	t.Helper()
	dir := t.TempDir()
	err := newRunner(dir, f, out).Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes})
	var serr *StepError
	if !errors.As(err, &serr) {
		t.Fatalf("want a *StepError, got %v", err)
	}
	return dir, err
}

func TestRunRollsBackAFailedChange(t *testing.T) {
	s := cluster(3, 1, "v1.35.4", "3.5.35")
	f := newFakeNodes(t, s)
	f.broken["master-2"] = KubeAPIServer
	var out bytes.Buffer
	dir, err := failedRun(t, f, s, &out)
	for _, w := range []string{"master-2: kube-apiserver v1.36.3 failed", "CrashLoopBackOff: unknown flag --broken", "rolled back to v1.35.4 on master-2"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	i := slices.Index(f.calls, "rollback master-2 kube-apiserver v1.35.4")
	if i < 0 || !slices.Equal(f.calls[i:], []string{"rollback master-2 kube-apiserver v1.35.4", "check master-2 kube-apiserver v1.35.4", "backend master-2 true"}) {
		t.Errorf("want the API server rolled back, checked and put back last: %q", f.calls)
	}
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.Contains(c, "master-1 kube-apiserver") }) {
		t.Errorf("the upgrade went on after a failed step: %q", f.calls)
	}
	if got := f.state.node("master-2").Versions[KubeAPIServer]; got != v("v1.35.4") {
		t.Errorf("master-2's API server runs %s after the rollback", got)
	}
	j, found, err := LoadJournal(dir)
	if err != nil || !found || j.Begun != nil {
		t.Errorf("after a rollback the journal is kept with no step begun: %+v, %v, %v", j, found, err)
	}
	// A re-run plans from what runs: master-0's control plane stays
	// upgraded, master-2's API server is tried again.
	f.broken = map[string]Component{}
	f.calls = nil
	st, _ := Inventoried(f)
	if err := newRunner(dir, f, &out).Run(context.Background(), mustPlan(t, st), j); err != nil {
		t.Fatal(err)
	}
	if f.calls[1] != "apply master-2 kube-apiserver v1.36.3" {
		t.Errorf("a re-run must start with master-2's API server: %q", f.calls)
	}
}

// TestRunGateReportsTheComponentsError: the error of a gate that times
// out is the component's, not one its own deadline caused in the last
// check (client-go's rate limiter refuses to wait past a deadline).
func TestRunGateReportsTheComponentsError(t *testing.T) {
	s := cluster(1, 0, "v1.35.4", "3.6.16")
	f := newFakeNodes(t, s)
	f.broken["master-0"] = KubeAPIServer
	f.hurried = time.Second
	r := newRunner(t.TempDir(), f, &bytes.Buffer{})
	err := r.Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes})
	if err == nil || !strings.Contains(err.Error(), "after 20ms: CrashLoopBackOff: unknown flag --broken") {
		t.Errorf("want the API server's error, got %v", err)
	}
}

// TestRunInterruptedIsNotFailed: a run whose context ends (Ctrl-C) in a
// gate leaves the step under way, rolls nothing back, and the next run
// finishes it.
func TestRunInterruptedIsNotFailed(t *testing.T) {
	s := cluster(1, 0, "v1.35.4", "3.6.16")
	f := newFakeNodes(t, s)
	f.slow = 1 << 30
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	r := newRunner(dir, f, &bytes.Buffer{})
	r.StepTimeout = time.Minute
	if err := r.Run(ctx, mustPlan(t, s), Journal{To: to136.Kubernetes}); err == nil {
		t.Fatal("an interrupted run succeeded")
	}
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "rollback") }) {
		t.Errorf("an interrupt rolled back: %q", f.calls)
	}
	j, _, err := LoadJournal(dir)
	if err != nil || j.Begun == nil || j.Begun.Failed != "" {
		t.Fatalf("want the step under way, not failed: %+v, %v", j.Begun, err)
	}
	f.slow, f.starting = 0, 0
	cur, _ := Inventoried(f)
	if err := newRunner(dir, f, &bytes.Buffer{}).Run(context.Background(), mustPlan(t, cur), j); err != nil {
		t.Fatal(err)
	}
}

// TestRunGateSaysWhatItWaitsFor: a gate that waits longer than
// waitReport prints the last error it saw.
func TestRunGateSaysWhatItWaitsFor(t *testing.T) {
	s := cluster(1, 0, "v1.35.4", "3.6.16")
	f := newFakeNodes(t, s)
	f.slow = 3
	var out bytes.Buffer
	r := newRunner(t.TempDir(), f, &out)
	tick := time.Unix(0, 0)
	r.Now = func() time.Time { tick = tick.Add(20 * time.Second); return tick }
	if err := r.Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "for kube-apiserver v1.36.3: starting") {
		t.Errorf("a long wait is silent:\n%s", out.String())
	}
}

// TestRunRollbackWaitsLongerThanAStep: a step timeout too short for the
// new version to start fails the change, and the rollback, gated by its
// own timeout, still waits for the old version to start again.
func TestRunRollbackWaitsLongerThanAStep(t *testing.T) {
	s := cluster(1, 0, "v1.35.4", "3.6.16")
	f := newFakeNodes(t, s)
	f.slow = 200 // polls 1 ms apart: longer than the step's 20 ms
	var out bytes.Buffer
	err := newRunner(t.TempDir(), f, &out).Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes})
	var serr *StepError
	if !errors.As(err, &serr) || serr.RollbackErr != nil || !strings.Contains(err.Error(), "not healthy at v1.36.3 after 20ms: starting") {
		t.Fatalf("want the change failed and rolled back, got %v", err)
	}
	if got := f.state.node("master-0").Versions[KubeAPIServer]; got != v("v1.35.4") || len(f.out) != 0 {
		t.Errorf("API server at %s, out of the load balancer: %v", got, f.out)
	}
}

// Inventoried is the state a fake cluster runs, as Inventory would read it.
func Inventoried(f *fakeNodes) (State, error) { return f.state.clone(), nil }

// TestRunResumesFromEveryKillPoint kills the run at each call that changes
// something, in turn (as a kill -9 would stop it there), then runs again
// from the journal and a plan made from what the cluster runs: the cluster ends at the target,
// every node uncordoned and every API server in the load balancer, never
// two of them out at once. The second case kills a run whose change fails
// and is rolled back, at each of its calls too; the re-runs (the failure
// fixed) finish the rollback, report it, then complete.
func TestRunResumesFromEveryKillPoint(t *testing.T) {
	for _, broken := range []map[string]Component{nil, {"master-2": KubeAPIServer}} {
		s := cluster(3, 2, "v1.35.4", "3.5.35")
		total := func() int {
			f := newFakeNodes(t, s)
			f.broken = broken
			_ = newRunner(t.TempDir(), f, &bytes.Buffer{}).Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes})
			return f.n
		}()
		for k := 1; k <= total; k++ {
			dir := t.TempDir()
			f := newFakeNodes(t, s)
			f.broken, f.killAt = broken, k
			func() {
				defer func() {
					if r := recover(); r != nil && r != (killed{}) {
						panic(r)
					}
				}()
				_ = newRunner(dir, f, &bytes.Buffer{}).Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes})
				t.Fatalf("broken %v, kill at call %d: the run was not killed", broken, k)
			}()
			f.killAt, f.broken = 0, nil
			var err error
			for range 2 {
				j, found, jerr := LoadJournal(dir)
				if jerr != nil || !found {
					t.Fatalf("broken %v, kill at call %d: journal %v, %v", broken, k, found, jerr)
				}
				cur, _ := Inventoried(f)
				p, perr := MakePlan(cur, to136, Options{})
				if perr != nil {
					t.Fatalf("broken %v, kill at call %d: the re-run's plan: %v", broken, k, perr)
				}
				if err = newRunner(dir, f, &bytes.Buffer{}).Run(context.Background(), p, j); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("broken %v, kill at call %d: the re-runs: %v", broken, k, err)
			}
			end, _ := Inventoried(f)
			if rest, err := MakePlan(end, to136, Options{}); err != nil || !rest.Empty() {
				t.Errorf("broken %v, kill at call %d: left to do after the re-run: %v %v", broken, k, rest, err)
			}
			if len(f.out) > 0 {
				t.Errorf("broken %v, kill at call %d: API servers left out of the load balancer: %v", broken, k, f.out)
			}
			if drained := cordoned(f.calls); len(drained) > 0 {
				t.Errorf("broken %v, kill at call %d: nodes left cordoned: %v", broken, k, drained)
			}
		}
	}
}

// cordoned lists the nodes whose last drain has no uncordon after it.
func cordoned(calls []string) []string {
	state := map[string]bool{}
	for _, c := range calls {
		if n, ok := strings.CutPrefix(c, "drain "); ok {
			state[n] = true
		}
		if n, ok := strings.CutPrefix(c, "uncordon "); ok {
			delete(state, n)
		}
	}
	var out []string
	for n := range state {
		out = append(out, n)
	}
	return out
}

func TestRunFinishesAnInterruptedRollback(t *testing.T) {
	s := cluster(1, 0, "v1.35.4", "3.5.35")
	f := newFakeNodes(t, s)
	f.state.node("master-0").Versions[Etcd] = v("3.6.16")
	f.state.node("master-0").Versions[KubeAPIServer] = v("v1.36.3")
	f.out["master-0"] = true
	dir := t.TempDir()
	st := Step{Nodes: []string{"master-0"}, Changes: []Change{
		{Component: KubeAPIServer, From: v("v1.35.4"), To: v("v1.36.3")},
		{Component: KubeControllerManager, From: v("v1.35.4"), To: v("v1.36.3")},
		{Component: KubeScheduler, From: v("v1.35.4"), To: v("v1.36.3")},
	}}
	j := Journal{To: "v1.36.3", Begun: &Begun{Step: st, Failed: "master-0: kube-apiserver v1.36.3: CrashLoopBackOff"}}
	if err := SaveJournal(dir, j); err != nil {
		t.Fatal(err)
	}
	cur, _ := Inventoried(f)
	err := newRunner(dir, f, &bytes.Buffer{}).Run(context.Background(), mustPlan(t, cur), j)
	if err == nil || !strings.Contains(err.Error(), "the upgrade stopped before: master-0: kube-apiserver v1.36.3: CrashLoopBackOff (rolled back)") {
		t.Fatalf("want the recorded failure reported, got %v", err)
	}
	if got := f.state.node("master-0").Versions[KubeAPIServer]; got != v("v1.35.4") || len(f.out) != 0 {
		t.Errorf("the API server runs %s, out of the load balancer: %v", got, f.out)
	}
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "apply") }) {
		t.Errorf("a rollback's resume must not apply anything: %q", f.calls)
	}
	// The rollback is over: the next run plans and goes on.
	if j, _, err := LoadJournal(dir); err != nil || j.Begun != nil {
		t.Errorf("after the rollback's resume the journal still has a step under way: %+v, %v", j.Begun, err)
	}
	cur, _ = Inventoried(f)
	j, _, _ = LoadJournal(dir)
	if err := newRunner(dir, f, &bytes.Buffer{}).Run(context.Background(), mustPlan(t, cur), j); err != nil {
		t.Errorf("the run after: %v", err)
	}
}

func TestJournalIsPrivateAndFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	if err := SaveJournal(dir, Journal{To: "v1.36.3"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, installdir.UpgradeJournal))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("journal: %v, %v", st, err)
	}
	evil, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(evil, ".kiln")); err != nil {
		t.Fatal(err)
	}
	if err := SaveJournal(evil, Journal{To: "v1.36.3"}); err == nil {
		t.Error("wrote the journal through a link")
	}
}

// TestRunKeepsAnIrreversibleChange: a change whose rollback cannot be made
// (the last etcd member's minor, once etcd's cluster version has moved)
// stays; the step stays under way, not failed, and the next run gates it
// again and goes on instead of rolling it back.
func TestRunKeepsAnIrreversibleChange(t *testing.T) {
	s := cluster(3, 1, "v1.35.4", "3.5.35")
	f := newFakeNodes(t, s)
	f.broken["master-2"] = Etcd
	f.oneWay["master-2"] = Etcd
	var out bytes.Buffer
	dir, err := failedRun(t, f, s, &out)
	for _, w := range []string{"master-2: etcd 3.6.16 failed", "it cannot be rolled back: one way. It stays at 3.6.16"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if got := f.state.node("master-2").Versions[Etcd]; got != v("3.6.16") {
		t.Errorf("master-2's etcd runs %s", got)
	}
	j, found, err := LoadJournal(dir)
	if err != nil || !found || j.Begun == nil || j.Begun.Failed != "" || j.Begun.Step.Nodes[0] != "master-2" {
		t.Fatalf("want master-2's etcd step under way, not failed: %+v, %v, %v", j.Begun, found, err)
	}
	// Fixed, the re-run finishes the step, with no rollback, and goes on.
	f.broken = map[string]Component{}
	f.calls = nil
	cur, _ := Inventoried(f)
	if err := newRunner(dir, f, &out).Run(context.Background(), mustPlan(t, cur), j); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.calls[:2], []string{"backend master-2 false", "apply master-2 etcd 3.6.16"}) || slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "rollback") }) {
		t.Errorf("the re-run must finish master-2's etcd first, and roll nothing back: %q", f.calls)
	}

	// Killed after the failure was recorded, before the rollback found out:
	// the resume finishes the step instead.
	f = newFakeNodes(t, s)
	for _, m := range []string{"master-0", "master-1", "master-2"} {
		f.state.node(m).Versions[Etcd] = v("3.6.16")
	}
	f.oneWay["master-2"] = Etcd
	st := Step{Nodes: []string{"master-2"}, Changes: []Change{{Component: Etcd, From: v("3.5.35"), To: v("3.6.16")}}}
	j = Journal{To: "v1.36.3", Begun: &Begun{Step: st, Failed: "master-2: etcd 3.6.16: not caught up"}}
	if err := SaveJournal(dir, j); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	cur, _ = Inventoried(f)
	if err := newRunner(dir, f, &out).Run(context.Background(), mustPlan(t, cur), j); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "master-2 cannot be rolled back (one way): waiting for it again") {
		t.Errorf("output:\n%s", out.String())
	}
	if f.state.node("master-2").Versions[Etcd] != v("3.6.16") || f.state.node("worker-0").Versions[Kubelet] != v("v1.36.3") {
		t.Errorf("want the upgrade finished: %+v", f.state)
	}
}

// TestRunFinishesBeforeTheJournalGoes: Finish (kiln upgrade cluster's
// certificate renewal) runs once, after the last step; when it fails the
// journal stays, so that the next run finishes it.
func TestRunFinishesBeforeTheJournalGoes(t *testing.T) {
	s := cluster(1, 0, "v1.35.4", "3.5.35")
	f := newFakeNodes(t, s)
	var out bytes.Buffer
	dir := t.TempDir()
	r := newRunner(dir, f, &out)
	r.Finish = func(context.Context) error {
		f.call("finish")
		if _, found, _ := LoadJournal(dir); !found {
			t.Error("the journal was gone before Finish")
		}
		return errors.New("renewal failed")
	}
	err := r.Run(context.Background(), mustPlan(t, s), Journal{To: to136.Kubernetes})
	if err == nil || !strings.Contains(err.Error(), "renewal failed") {
		t.Fatalf("Run = %v, want Finish's error", err)
	}
	if last := f.calls[len(f.calls)-1]; last != "finish" || slices.Index(f.calls, "finish") != len(f.calls)-1 {
		t.Errorf("calls %q: want finish once, last", f.calls)
	}
	if _, found, _ := LoadJournal(dir); !found {
		t.Error("a failed Finish removed the journal")
	}
	if strings.Contains(out.String(), "Upgrade complete") {
		t.Errorf("complete before Finish succeeded:\n%s", out.String())
	}
}
