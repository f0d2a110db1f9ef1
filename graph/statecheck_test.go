package graph_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

type (
	sCA   struct{}
	sLeaf struct{}
)

func (sCA) id() string            { return "ca" }
func (sCA) deps() []graph.Asset   { return nil }
func (sCA) file() string          { return "" }
func (sLeaf) id() string          { return "leaf" }
func (sLeaf) deps() []graph.Asset { return []graph.Asset{&checked[sCA]{}} }
func (sLeaf) file() string        { return "leaf.txt" }

// checked is a plain asset whose value, restored from the state file, must
// still look like one Generate made, as a CA's key must still match its
// certificate.
type checked[S spec] struct{ plain[S] }

func (a *checked[S]) CheckState() error {
	if !strings.HasPrefix(a.Value, a.ID()+"(") {
		return fmt.Errorf("value %q is not one kiln made", a.Value)
	}
	return nil
}

// A state entry that decodes but fails its asset's check (a CA key swapped
// or garbled in .kiln_state.json) stops the run as bad input naming the
// asset, the state file and the problem; it is never generated again, which
// would silently replace a CA, and --dir is left as it was.
func TestStateEntryFailingItsCheckIsAnInputError(t *testing.T) {
	dir := t.TempDir()
	ctx, _ := withHooks(t)
	tgt := func() graph.Target { return target(&fileAsset[sLeaf]{}) }
	s, _ := open(t, dir)
	if err := s.Persist(ctx, tgt()); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, installdir.State)
	var st map[string]any
	if err := json.Unmarshal([]byte(readFile(t, dir, installdir.State)), &st); err != nil {
		t.Fatal(err)
	}
	st["assets"].(map[string]any)["ca"].(map[string]any)["value"] = map[string]any{"value": "garbled"}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The leaf must be made again, from the CA.
	if err := os.Remove(filepath.Join(dir, "leaf.txt")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	ctx2, h2 := withHooks(t)
	s2, _ := open(t, dir)
	err := s2.Persist(ctx2, tgt())
	if !graph.IsInputError(err) {
		t.Fatalf("err = %v, want an input error", err)
	}
	for _, want := range []string{name, "asset ca is damaged", `value "garbled" is not one kiln made`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, does not say %q", err, want)
		}
	}
	if len(h2.calls) != 0 {
		t.Errorf("generated %v", h2.calls)
	}
	if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("--dir changed")
	}
	// FromState, which commands use to read one asset, checks too.
	if _, err := s2.FromState(&checked[sCA]{}); !graph.IsInputError(err) {
		t.Errorf("FromState = %v, want an input error", err)
	}
}
