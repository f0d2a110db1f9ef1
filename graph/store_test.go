package graph_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

func open(t *testing.T, dir string, opts ...graph.Option) (*graph.Store, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	s, err := graph.Open(dir, append([]graph.Option{graph.WithLogger(log)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, hook
}

func target(assets ...graph.WritableAsset) graph.Target {
	return graph.Target{Name: "test", Assets: assets}
}

func TestFetchResolvesDependenciesFirstAndOnce(t *testing.T) {
	ctx, h := withHooks(t)
	s, _ := open(t, t.TempDir())
	ign := &fileAsset[sIgn]{}
	if err := s.Fetch(ctx, ign); err != nil {
		t.Fatal(err)
	}
	want := "ign(man(ic(),cert(ic(),key1())),key2())"
	if ign.Value != want {
		t.Errorf("value = %s, want %s", ign.Value, want)
	}
	for _, id := range []string{"ic", "key1", "key2", "cert", "man", "ign"} {
		if got := h.count(id); got != 1 {
			t.Errorf("%s generated %d times, want 1", id, got)
		}
	}
}

func TestFetchGeneratesIndependentBranchesInParallel(t *testing.T) {
	ctx, h := withHooks(t)
	// Both keys must be inside Generate at the same time to pass the
	// barrier; generated one after the other, the first one times out.
	arrived := make(chan struct{}, 2)
	barrier := func(ctx context.Context, _ graph.Parents) error {
		arrived <- struct{}{}
		deadline := time.After(10 * time.Second)
		for len(arrived) < 2 {
			select {
			case <-deadline:
				return errors.New("the other key pair was not being generated concurrently")
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	}
	h.gen["key1"], h.gen["key2"] = barrier, barrier
	s, _ := open(t, t.TempDir())
	if err := s.Fetch(ctx, &fileAsset[sIgn]{}); err != nil {
		t.Fatal(err)
	}
}

func TestFetchReportsCycleWithPath(t *testing.T) {
	ctx, _ := withHooks(t)
	s, _ := open(t, t.TempDir())
	err := s.Fetch(ctx, &plain[sCycA]{})
	var ce *graph.CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a CycleError", err)
	}
	if want := []string{"a", "b", "a"}; !reflect.DeepEqual(ce.Cycle, want) {
		t.Errorf("cycle = %v, want %v", ce.Cycle, want)
	}
	if got, want := err.Error(), "dependency cycle: a -> b -> a"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestParentsGetRejectsUndeclaredParent(t *testing.T) {
	ctx, h := withHooks(t)
	h.gen["cert"] = func(_ context.Context, p graph.Parents) error {
		return p.Get(&plain[sKey2]{}) // cert declares ic and key1 only
	}
	s, _ := open(t, t.TempDir())
	err := s.Fetch(ctx, &plain[sCert]{})
	if err == nil || !strings.Contains(err.Error(), "does not declare") {
		t.Fatalf("err = %v, want an undeclared-parent error", err)
	}
}

func TestErrorsAreWrappedOnceWithThePath(t *testing.T) {
	tests := []struct {
		name      string
		failing   string
		err       error
		wantMsg   string
		wantPath  []string
		wantInput bool
	}{
		{"internal", "cert", errors.New("boom"), "ign <- man <- cert: boom", []string{"ign", "man", "cert"}, false},
		{"input stays flat", "ic", &graph.InputError{Err: errors.New("config.txt: x: Invalid value")},
			"config.txt: x: Invalid value", []string{"ign", "man", "ic"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, h := withHooks(t)
			h.gen[tt.failing] = func(context.Context, graph.Parents) error { return tt.err }
			s, _ := open(t, t.TempDir())
			err := s.Fetch(ctx, &fileAsset[sIgn]{})
			if err == nil || err.Error() != tt.wantMsg {
				t.Fatalf("err = %v, want %q", err, tt.wantMsg)
			}
			var ae *graph.AssetError
			if !errors.As(err, &ae) || !reflect.DeepEqual(ae.Path, tt.wantPath) {
				t.Fatalf("path = %v, want %v", ae, tt.wantPath)
			}
			if errors.As(ae.Err, new(*graph.AssetError)) {
				t.Errorf("AssetError wraps another AssetError: %v", err)
			}
			if graph.IsInputError(err) != tt.wantInput {
				t.Errorf("input error = %t, want %t", graph.IsInputError(err), tt.wantInput)
			}
		})
	}
}

func TestPersistRoundTripRegeneratesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx, h := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	st, err := os.Stat(filepath.Join(dir, installdir.State))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, mode %v; want 0600", err, st)
	}
	ctx2, h2 := withHooks(t)
	s2, _ := open(t, dir)
	if err := s2.Persist(ctx2, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	if got := s2.Generated(); len(got) != 0 {
		t.Errorf("Generated() = %v after a no-op run", got)
	}
	if got := s.Generated(); !reflect.DeepEqual(got, []string{"cert", "ic", "key1", "man"}) {
		t.Errorf("first run Generated() = %v", got)
	}
	if h.count("man") != 1 || len(h2.calls) != 0 {
		t.Errorf("second run generated %v, want nothing", h2.calls)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("second run changed --dir:\nbefore %v\nafter  %v", before, after)
	}
}

func TestUserEditWinsAndDependentsRegenerate(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "config.txt", "edited\n")
	ctx2, h2 := withHooks(t)
	s2, logs := open(t, dir)
	if err := s2.Persist(ctx2, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, dir, "manifests/m.yaml"), "man(edited,cert(edited,key1()))\n"; got != want {
		t.Errorf("manifest = %q, want %q", got, want)
	}
	if readFile(t, dir, "config.txt") != "edited\n" {
		t.Error("the edit of config.txt was overwritten")
	}
	if h2.count("cert") != 1 || h2.count("man") != 1 || h2.count("key1") != 0 || h2.count("ic") != 0 {
		t.Errorf("regenerated %v, want cert and man only", h2.calls)
	}
	var warned bool
	for _, e := range logs.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "config.txt") {
			warned = true
		}
	}
	if !warned {
		t.Error("no warning names config.txt")
	}
}

func TestEditWithChangedDependenciesIsAConflict(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	tgt := func() graph.Target { return target(&fileAsset[sIC]{}, &fileAsset[sMan]{}) }
	if err := s.Persist(ctx, tgt()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "config.txt", "edited\n")
	writeFile(t, dir, "manifests/m.yaml", "my own manifest\n")
	before := snapshot(t, dir)

	s2, _ := open(t, dir)
	err := s2.Persist(ctx, tgt())
	var ce *graph.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ConflictError", err)
	}
	if !reflect.DeepEqual(ce.Edited, []string{"manifests/m.yaml"}) || !reflect.DeepEqual(ce.Changed, []string{"config.txt"}) {
		t.Errorf("conflict = %+v", ce)
	}
	if !graph.IsInputError(err) || !strings.Contains(err.Error(), "--force-regenerate") {
		t.Errorf("err = %v, want an input error naming --force-regenerate", err)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed run changed --dir")
	}

	s3, _ := open(t, dir, graph.WithForceRegenerate(true))
	if err := s3.Persist(ctx, tgt()); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "manifests/m.yaml"); got != "man(edited,cert(edited,key1()))\n" {
		t.Errorf("--force-regenerate kept %q", got)
	}
}

func TestPersistConsumesFilesOfEarlierTargets(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	manifest := readFile(t, dir, "manifests/m.yaml")
	s2, logs := open(t, dir)
	if err := s2.Persist(ctx, target(&fileAsset[sIgn]{})); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"config.txt", "manifests/m.yaml", "manifests"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still in --dir (%v)", gone, err)
		}
	}
	if got := readFile(t, dir, ".kiln/consumed/manifests/m.yaml"); got != manifest {
		t.Errorf("consumed copy = %q, want %q", got, manifest)
	}
	for _, p := range []string{".kiln/consumed/config.txt", ".kiln/consumed/manifests/m.yaml"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600: a consumed install-config holds the pull secret", p, st.Mode(), err)
		}
	}
	if len(logs.AllEntries()) == 0 || !strings.Contains(logs.LastEntry().Message, ".kiln/consumed/") {
		t.Errorf("no log says where consumed files went")
	}
	// The consumed assets come back from the state file.
	ctx3, h3 := withHooks(t)
	s3, _ := open(t, dir)
	before := snapshot(t, dir)
	if err := s3.Persist(ctx3, target(&fileAsset[sIgn]{})); err != nil {
		t.Fatal(err)
	}
	if len(h3.calls) != 0 {
		t.Errorf("third run generated %v", h3.calls)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("third run changed --dir")
	}
}

// Copies an older kiln consumed with the original's 0644 are set back to
// 0600 when the store opens --dir.
func TestOpenTightensConsumedCopies(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ".kiln/consumed/install-config.yaml", "pullSecret: x\n")
	writeFile(t, dir, ".kiln/consumed/manifests/m.yaml", "m\n")
	if err := os.Chmod(filepath.Join(dir, ".kiln/consumed/manifests/m.yaml"), 0o640); err != nil {
		t.Fatal(err)
	}
	_, logs := open(t, dir)
	for _, p := range []string{".kiln/consumed/install-config.yaml", ".kiln/consumed/manifests/m.yaml"} {
		if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", p, st.Mode(), err)
		}
	}
	if e := logs.LastEntry(); e == nil || !strings.Contains(e.Message, "install-config.yaml") {
		t.Errorf("no warning names the widened copies")
	}
}

func TestFailedRunLeavesDirUntouched(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*testing.T, string, *hooks)
	}{
		{"bad input file", func(t *testing.T, dir string, _ *hooks) { writeFile(t, dir, "config.txt", "bad\n") }},
		{"generate fails", func(t *testing.T, dir string, h *hooks) {
			writeFile(t, dir, "config.txt", "mine\n")
			h.gen["cert"] = func(context.Context, graph.Parents) error { return errors.New("boom") }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, h := withHooks(t)
			tt.setup(t, dir, h)
			before := snapshot(t, dir)
			s, _ := open(t, dir)
			if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err == nil {
				t.Fatal("Persist succeeded")
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
				t.Errorf("--dir changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestUserProvidedFileIsUsedWithoutWarning(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "config.txt", "mine\n")
	ctx, h := withHooks(t)
	s, logs := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	if h.count("ic") != 0 {
		t.Error("generated an asset the user provided")
	}
	for _, e := range logs.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			t.Errorf("unexpected %v: %s", e.Level, e.Message)
		}
	}
	if got := readFile(t, dir, "manifests/m.yaml"); got != "man(mine,cert(mine,key1()))\n" {
		t.Errorf("manifest = %q", got)
	}
}

// secret is a writable asset whose file holds a secret.
type secret struct {
	Key string `json:"key"`
}

func (*secret) ID() string                  { return "secret" }
func (*secret) Name() string                { return "Secret" }
func (*secret) Dependencies() []graph.Asset { return nil }
func (s *secret) Generate(context.Context, graph.Parents) error {
	s.Key = "hunter2"
	return nil
}
func (s *secret) Files() []*graph.File {
	return []*graph.File{{Path: "auth/secret", Data: []byte(s.Key), Mode: 0o600}}
}
func (*secret) Load(graph.FileFetcher) (bool, error) { return false, nil }

func TestPersistWritesFileModesAndNeverLogsSecrets(t *testing.T) {
	dir := t.TempDir()
	s, logs := open(t, dir)
	if err := s.Persist(context.Background(), target(&secret{})); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "auth/secret"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("auth/secret: %v %v, want mode 0600", err, st)
	}
	for _, e := range logs.AllEntries() {
		if strings.Contains(e.Message, "hunter2") {
			t.Errorf("secret logged: %s", e.Message)
		}
	}
}

func TestWriteDotIsDeterministicAndReportsCycles(t *testing.T) {
	var b strings.Builder
	if err := graph.WriteDot(&b, &fileAsset[sIgn]{}, &fileAsset[sIC]{}); err != nil {
		t.Fatal(err)
	}
	want := `digraph kiln {
  rankdir=LR;
  node [shape=box];
  "cert" [label="test asset cert"];
  "ic" [label="test asset ic"];
  "ign" [label="test asset ign"];
  "key1" [label="test asset key1"];
  "key2" [label="test asset key2"];
  "man" [label="test asset man"];
  "cert" -> "man";
  "ic" -> "cert";
  "ic" -> "man";
  "key1" -> "cert";
  "key2" -> "ign";
  "man" -> "ign";
}
`
	if b.String() != want {
		t.Errorf("dot =\n%s\nwant\n%s", b.String(), want)
	}
	err := graph.WriteDot(&b, &plain[sCycB]{})
	var ce *graph.CycleError
	if !errors.As(err, &ce) || !reflect.DeepEqual(ce.Cycle, []string{"b", "a", "b"}) {
		t.Errorf("err = %v, want cycle b -> a -> b", err)
	}
}

// A command works with one store for its whole run: what Persist wrote is
// what the same store's FromState reads next (create cluster persists the
// Ignition configs, then loads the cluster from them).
func TestFromStateReadsWhatPersistWrote(t *testing.T) {
	ctx, _ := withHooks(t)
	s, _ := open(t, t.TempDir())
	ign := &fileAsset[sIgn]{}
	if found, err := s.FromState(ign); found || err != nil {
		t.Fatalf("FromState before Persist = %v, %v; want not found", found, err)
	}
	if err := s.Persist(ctx, target(ign)); err != nil {
		t.Fatal(err)
	}
	got := &fileAsset[sIgn]{}
	if found, err := s.FromState(got); !found || err != nil || got.Value != ign.Value {
		t.Fatalf("FromState after Persist = %v, %v, %q; want %q", found, err, got.Value, ign.Value)
	}
}

// persisted returns a --dir where ic and man were persisted, and its
// state as read back.
func persisted(t *testing.T) (string, *graph.State) {
	t.Helper()
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	st, err := graph.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func TestStateRecordedTellsWrittenFilesFromEdits(t *testing.T) {
	dir, st := persisted(t)
	written := []byte(readFile(t, dir, "config.txt"))
	if !st.Recorded("ic", "config.txt", written) {
		t.Error("the file as kiln wrote it is not recorded")
	}
	for _, c := range []struct{ id, name, data string }{
		{"ic", "config.txt", "edited\n"},
		{"ic", "other.txt", string(written)},
		{"man", "config.txt", string(written)},
		{"missing", "config.txt", string(written)},
	} {
		if st.Recorded(c.id, c.name, []byte(c.data)) {
			t.Errorf("Recorded(%s, %s, %q) = true, want false", c.id, c.name, c.data)
		}
	}
}
