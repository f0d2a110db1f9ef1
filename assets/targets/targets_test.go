package targets

import (
	"io"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// TestTargetsFormADAG checks the whole asset graph: no cycle, no ID claimed
// by two types, every target's name distinct and no file written by two
// assets of one target.
func TestTargetsFormADAG(t *testing.T) {
	if err := graph.WriteDot(io.Discard, Assets()...); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tg := range All() {
		if names[tg.Name] {
			t.Errorf("two targets are called %s", tg.Name)
		}
		names[tg.Name] = true
		ids := map[string]bool{}
		for _, a := range tg.Assets {
			if ids[a.ID()] {
				t.Errorf("target %s lists %s twice", tg.Name, a.ID())
			}
			ids[a.ID()] = true
		}
	}
	if len(InstallConfig().Assets) != 1 || InstallConfig().Assets[0].ID() != "install-config" {
		t.Errorf("install-config target = %v", InstallConfig().Assets)
	}
}
