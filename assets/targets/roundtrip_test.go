package targets

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/graph"
)

const config = `apiVersion: kiln.dev/v1
metadata:
  name: dev
baseDomain: example.com
platform:
  none: {}
`

// TestRoundTrip creates every target in order, then again in a new store:
// the second pass generates nothing and leaves every file as it was.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ctx := installconfig.WithInput(context.Background(), installconfig.Input{In: strings.NewReader(config)})
	// Each target, in the order a user runs them, generated then run again:
	// the second run regenerates nothing and leaves --dir byte-identical.
	// (Running an earlier target after a later one writes its consumed files
	// back, as openshift-install does, so that is not a no-op.)
	for _, tg := range All() {
		if len(tg.Assets) == 0 {
			t.Fatalf("target %s lists no assets", tg.Name)
		}
		s, err := graph.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(ctx, tg); err != nil {
			t.Fatalf("%s: %v", tg.Name, err)
		}
		before := snapshot(t, dir)
		s, err = graph.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(context.Background(), tg); err != nil {
			t.Fatalf("second %s: %v", tg.Name, err)
		}
		if g := s.Generated(); len(g) > 0 {
			t.Errorf("second %s regenerated %v", tg.Name, g)
		}
		if after := snapshot(t, dir); !maps.Equal(before, after) {
			t.Errorf("second %s changed --dir", tg.Name)
		}
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = info.Mode().String() + info.ModTime().String() + string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
