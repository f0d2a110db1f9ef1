package graph_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

type (
	sMid       struct{}
	sOwned     struct{}
	sUnrelated struct{}
)

func (sMid) id() string                { return "mid" }
func (sMid) deps() []graph.Asset       { return []graph.Asset{&plain[sCA]{}} }
func (sMid) file() string              { return "" }
func (sOwned) id() string              { return "owned" }
func (sOwned) deps() []graph.Asset     { return []graph.Asset{&plain[sMid]{}} }
func (sOwned) file() string            { return "owned.txt" }
func (sUnrelated) id() string          { return "unrelated" }
func (sUnrelated) deps() []graph.Asset { return nil }
func (sUnrelated) file() string        { return "" }

// adopting is a file asset whose file, when adopted from --dir, must name
// the value of its grandparent ca, as an Ignition config must embed the
// cluster's CA. checks counts the calls of CheckAdopted.
type adopting struct {
	fileAsset[sOwned]
	checks *atomic.Int32
	read   graph.Asset // the ancestor CheckAdopted reads
}

func (a *adopting) CheckAdopted(_ context.Context, p graph.Parents) error {
	a.checks.Add(1)
	if err := p.Get(a.read); err != nil {
		return err
	}
	ca, ok := a.read.(*plain[sCA])
	if !ok {
		return nil
	}
	if !strings.Contains(a.Value, ca.Value) {
		return &graph.InputError{Err: fmt.Errorf("owned.txt: made with a CA other than %s", ca.Value)}
	}
	return nil
}

// The store checks a file it adopts against the asset's ancestors (its
// grandparent here), refuses a mismatch as bad input with --dir unchanged,
// and does not check files it restores from the state file.
func TestAdoptedFileIsCheckedAgainstAncestors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		read    graph.Asset
		fails   bool
		input   bool
		want    string
	}{
		{name: "matches", content: "owned(mid(ca()))", read: &plain[sCA]{}},
		{name: "another cluster's", content: "owned(mid(ca-of-another-cluster))", read: &plain[sCA]{}, fails: true, input: true,
			want: "owned.txt: made with a CA other than ca()"},
		{name: "no ancestor", content: "owned(mid(ca()))", read: &plain[sUnrelated]{}, fails: true,
			want: "asset owned reads unrelated, which is none of its dependencies nor of theirs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "owned.txt", tc.content+"\n")
			before := snapshot(t, dir)
			ctx, _ := withHooks(t)
			s, _ := open(t, dir)
			checks := &atomic.Int32{}
			err := s.Persist(ctx, target(&adopting{checks: checks, read: tc.read}))
			if checks.Load() != 1 {
				t.Errorf("CheckAdopted ran %d times, want once", checks.Load())
			}
			if !tc.fails {
				if err != nil {
					t.Fatalf("Persist = %v", err)
				}
				return
			}
			if err == nil || graph.IsInputError(err) != tc.input || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Persist = %v, want an error (input: %t) saying %q", err, tc.input, tc.want)
			}
			if tc.input && err.Error() != tc.want {
				t.Errorf("input error %q is not flat", err)
			}
			if after := snapshot(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("--dir changed")
			}
		})
	}
}

// A file kiln wrote and nobody edited is restored, not adopted: no check.
func TestOwnFileIsNotChecked(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	checks := &atomic.Int32{}
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&adopting{checks: checks, read: &plain[sCA]{}})); err != nil {
		t.Fatal(err)
	}
	s2, _ := open(t, dir)
	if err := s2.Persist(ctx, target(&adopting{checks: checks, read: &plain[sCA]{}})); err != nil {
		t.Fatal(err)
	}
	if n := checks.Load(); n != 0 {
		t.Errorf("CheckAdopted ran %d times for files kiln wrote", n)
	}
}
