package graph_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// nonce is an asset whose every generation differs, like a CA: outputs made
// from two generations of it are a mixed --dir.
type nonce struct {
	Value string `json:"value"`
}

func (*nonce) ID() string                  { return "nonce" }
func (*nonce) Name() string                { return "nonce" }
func (*nonce) Dependencies() []graph.Asset { return nil }
func (n *nonce) value() string             { return n.Value }
func (n *nonce) Generate(context.Context, graph.Parents) error {
	b := make([]byte, 8)
	rand.Read(b)
	n.Value = hex.EncodeToString(b)
	return nil
}

type (
	sOutA struct{}
	sOutB struct{}
)

func (sOutA) id() string          { return "outA" }
func (sOutA) deps() []graph.Asset { return []graph.Asset{&nonce{}} }
func (sOutA) file() string        { return "a.txt" }
func (sOutB) id() string          { return "outB" }
func (sOutB) deps() []graph.Asset { return []graph.Asset{&nonce{}} }
func (sOutB) file() string        { return "b/b.txt" }

// nonceTarget writes two files made from one nonce.
func nonceTarget() graph.Target {
	return target(&fileAsset[sIC]{}, &fileAsset[sOutA]{}, &fileAsset[sOutB]{})
}

// checkNonces fails unless both files and the state hold the same nonce.
func checkNonces(t *testing.T, dir string) {
	t.Helper()
	var st graph.State
	if err := json.Unmarshal([]byte(readFile(t, dir, installdir.State)), &st); err != nil {
		t.Fatal(err)
	}
	var n nonce
	if e := st.Assets["nonce"]; e == nil || json.Unmarshal(e.Value, &n) != nil {
		t.Fatalf("no nonce in the state")
	}
	for _, f := range []string{"a.txt", "b/b.txt"} {
		if got := readFile(t, dir, f); !strings.Contains(got, n.Value) {
			t.Errorf("%s = %q is not made from the state's nonce %s: mixed --dir", f, got, n.Value)
		}
	}
}

// D1: a run that fails (or is killed) part-way through writing is finished
// by the next run, never adopted half as user edits.
func TestInterruptedWriteIsFinishedByTheNextRun(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	// The write of b/b.txt fails (a directory in its place would be refused
	// on load, before any write: see TestNonRegularFileIsNamed).
	failB := graph.WithFaults(func(_ atomicfile.Op, p string) error {
		if strings.Contains(p, "b.txt") {
			return syscall.EIO
		}
		return nil
	})
	s, _ := open(t, dir, failB)
	err := s.Persist(ctx, nonceTarget())
	if err == nil {
		t.Fatal("Persist succeeded with the write of b/b.txt failing")
	}
	if !strings.Contains(err.Error(), "run kiln again") {
		t.Errorf("error %q does not say what to do", err)
	}
	ctx2, h2 := withHooks(t)
	s2, _ := open(t, dir)
	if err := s2.Persist(ctx2, nonceTarget()); err != nil {
		t.Fatal(err)
	}
	checkNonces(t, dir)
	if h2.count("nonce") != 0 {
		t.Errorf("the next run generated the nonce again instead of finishing the interrupted run")
	}
	assertClean(t, dir)
}

// assertClean fails on a journal or a temporary file left in dir.
func assertClean(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && (strings.HasPrefix(d.Name(), ".kiln-tmp-") || d.Name() == installdir.Journal || d.Name() == installdir.Lock) {
			t.Errorf("%s left in --dir", p)
		}
		return nil
	})
}

// D3: a state entry that does not decode stops the run, naming the asset
// and the state file; nothing is regenerated.
func TestDamagedStateEntryIsAnInputError(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, installdir.State)
	var st map[string]any
	if err := json.Unmarshal([]byte(readFile(t, dir, installdir.State)), &st); err != nil {
		t.Fatal(err)
	}
	st["assets"].(map[string]any)["key1"].(map[string]any)["value"] = "!!!"
	b, _ := json.Marshal(st)
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	ctx2, h2 := withHooks(t)
	s2, _ := open(t, dir)
	err := s2.Persist(ctx2, target(&fileAsset[sIC]{}, &fileAsset[sMan]{}))
	if err == nil {
		t.Fatal("a damaged state entry was accepted")
	}
	if !graph.IsInputError(err) || !strings.Contains(err.Error(), "key1") || !strings.Contains(err.Error(), name) {
		t.Errorf("err = %v, want an input error naming key1 and %s", err, name)
	}
	if len(h2.calls) != 0 {
		t.Errorf("generated %v", h2.calls)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("--dir changed")
	}
}

// D5: the state file is set back to 0600 by any run, even one that
// changes nothing.
func TestStateFileModeIsEnforcedOnEveryRun(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{})); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, installdir.State)
	if err := os.Chmod(name, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, _ := open(t, dir)
	if err := s2.Persist(ctx, target(&fileAsset[sIC]{})); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(name); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v after a no-op run, want 0600 (%v)", st.Mode().Perm(), err)
	}
}

// D4: every bad input of a run is reported, sorted, the same way every
// time, and a sibling's failure never turns into "context canceled".
func TestEveryInputErrorIsReportedSorted(t *testing.T) {
	want := []string{"config.txt: bad content", "key2: bad key", "manifests/m.yaml: bad content"}
	for range 20 {
		dir := t.TempDir()
		writeFile(t, dir, "config.txt", "bad\n")
		writeFile(t, dir, "manifests/m.yaml", "bad\n")
		ctx, h := withHooks(t)
		h.gen["key2"] = func(context.Context, graph.Parents) error {
			return &graph.InputError{Err: errors.New("key2: bad key")}
		}
		h.gen["key1"] = func(ctx context.Context, _ graph.Parents) error {
			select { // slower than key2's failure
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
				return nil
			}
		}
		s, _ := open(t, dir)
		err := s.Fetch(ctx, &fileAsset[sIgn]{}, &plain[sCert]{})
		if err == nil {
			t.Fatal("Fetch succeeded")
		}
		if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
			t.Fatalf("errors =\n%s\nwant\n%s", err, strings.Join(want, "\n"))
		}
		if !graph.IsInputError(err) {
			t.Errorf("%v: not an input error", err)
		}
		var list graph.Errors
		if !errors.As(err, &list) || !reflect.DeepEqual(list[0].Path, []string{"ign", "man", "ic"}) {
			t.Errorf("paths: %v", list)
		}
	}
}

// Several failures are bad input only when every one of them is: a bad file
// beside a failure of kiln's own is not the user's alone to fix.
func TestSeveralFailuresAreInputOnlyWhenAllAre(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "config.txt", "bad\n")
	ctx, h := withHooks(t)
	h.gen["key2"] = func(context.Context, graph.Parents) error { return errors.New("key2: disk full") }
	s, _ := open(t, dir)
	err := s.Fetch(ctx, &fileAsset[sIgn]{}, &plain[sCert]{})
	var list graph.Errors
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("err = %v, want two failures", err)
	}
	if graph.IsInputError(err) || !graph.IsInputError(list[0]) || graph.IsInputError(list[1]) {
		t.Errorf("%v: input errors %t (%t, %t), want false (true, false)", err,
			graph.IsInputError(err), graph.IsInputError(list[0]), graph.IsInputError(list[1]))
	}
}
