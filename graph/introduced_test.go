package graph_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// introValue is the context key of the value intro generates.
type introValue struct{}

// intro is an Introduced test asset: its value comes from the context,
// "default" unless a test sets another.
type intro struct {
	Value string `json:"value"`
}

func (*intro) ID() string                  { return "intro" }
func (*intro) Name() string                { return "introduced test asset" }
func (*intro) Dependencies() []graph.Asset { return nil }
func (a *intro) Default() bool             { return a.Value == "default" }
func (a *intro) value() string             { return a.Value }

func (a *intro) Generate(ctx context.Context, _ graph.Parents) error {
	a.Value = "default"
	if v, ok := ctx.Value(introValue{}).(string); ok {
		a.Value = v
	}
	return nil
}

type sIntroLeaf struct{}

func (sIntroLeaf) id() string          { return "introleaf" }
func (sIntroLeaf) deps() []graph.Asset { return []graph.Asset{&fileAsset[sIC]{}, &intro{}} }
func (sIntroLeaf) file() string        { return "introleaf.txt" }

// dirBeforeIntro returns a --dir whose leaf was made before intro existed:
// its state entry records no hash for intro, and the state has no intro.
func dirBeforeIntro(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sIntroLeaf]{})); err != nil {
		t.Fatal(err)
	}
	st, err := graph.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	delete(st.Assets["introleaf"].Parents, "intro")
	delete(st.Assets, "intro")
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, installdir.State), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// An Introduced parent that holds its default does not make what an
// earlier kiln made without it stale; one that holds another value does.
func TestIntroducedParentKeepsOlderDependentsAtItsDefault(t *testing.T) {
	for _, tc := range []struct {
		name, value   string
		wantGenerated []string
	}{
		{name: "default", value: "default", wantGenerated: []string{"intro"}},
		{name: "another value", value: "short", wantGenerated: []string{"intro", "introleaf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := dirBeforeIntro(t)
			ctx, h := withHooks(t)
			ctx = context.WithValue(ctx, introValue{}, tc.value)
			s, _ := open(t, dir)
			if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sIntroLeaf]{})); err != nil {
				t.Fatal(err)
			}
			if got := s.Generated(); !slices.Equal(got, tc.wantGenerated) {
				t.Errorf("Generated() = %q, want %q", got, tc.wantGenerated)
			}
			want := 0
			if slices.Contains(tc.wantGenerated, "introleaf") {
				want = 1
			}
			if got := h.count("introleaf"); got != want {
				t.Errorf("leaf generated %d times, want %d", got, want)
			}
		})
	}
}

// WithRenew generates the named assets again, with everything made from
// them, and nothing else; a file of a renewed asset is replaced.
func TestRenewGeneratesTheAssetsAndTheirDependents(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	s, _ := open(t, dir)
	if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{}, &fileAsset[sIgn]{})); err != nil {
		t.Fatal(err)
	}
	ctx2, h := withHooks(t)
	s2, _ := open(t, dir, graph.WithRenew("cert"))
	if err := s2.Persist(ctx2, target(&fileAsset[sIC]{}, &fileAsset[sMan]{}, &fileAsset[sIgn]{})); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"cert": 1, "man": 0, "ign": 0, "ic": 0, "key1": 0, "key2": 0} {
		if got := h.count(id); got != want {
			t.Errorf("%s generated %d times, want %d", id, got, want)
		}
	}
	// The test assets' values do not change when generated again, so man
	// and ign are restored: what the renewal changes is what they copy.
	if got := s2.Generated(); !slices.Equal(got, []string{"cert"}) {
		t.Errorf("Generated() = %q, want [cert]", got)
	}

	writeFile(t, dir, "config.txt", "edited\n")
	ctx3, h3 := withHooks(t)
	s3, _ := open(t, dir, graph.WithRenew("ic"))
	if err := s3.Persist(ctx3, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "config.txt"); got != "ic()\n" {
		t.Errorf("config.txt = %q after renewing ic, want kiln's value", got)
	}
	if h3.count("ic") != 1 {
		t.Errorf("generated %v; want ic again", h3.calls)
	}
}
