package graph_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// oldDir returns a --dir as an earlier kiln left it: its state file also
// holds "old/secret", an asset this kiln no longer has, which "man"
// depended on, and the file that asset wrote is still in --dir.
func oldDir(t *testing.T) string {
	t.Helper()
	dir, st := persisted(t)
	st.Assets["old/secret"] = &graph.StateEntry{
		Hash:  "h-old",
		Disk:  map[string]string{"auth/old-secret": "h-file"},
		Value: json.RawMessage(`{"file":{"path":"auth/old-secret","data":"aHVudGVyMg=="},"hash":"hunter2"}`),
	}
	st.Assets["man"].Parents["old/secret"] = "h-old"
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, installdir.State), b, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "auth/old-secret", "hunter2\n")
	return dir
}

// An asset ID the store is told is retired leaves the state file, and what
// depended on it is restored unchanged; without WithRetired the entry is
// kept (as any entry this run does not fetch) and its dependents, whose
// parents changed, are generated again.
func TestRetiredAssetsLeaveTheStateAndDependentsStay(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          []graph.Option
		wantGenerated []string
		wantKept      bool
	}{
		{name: "retired", opts: []graph.Option{graph.WithRetired("old/secret", "never/existed")}},
		{name: "not retired", wantGenerated: []string{"man"}, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := oldDir(t)
			before := snapshot(t, dir)
			ctx, _ := withHooks(t)
			s, _ := open(t, dir, tc.opts...)
			if err := s.Persist(ctx, target(&fileAsset[sIC]{}, &fileAsset[sMan]{})); err != nil {
				t.Fatal(err)
			}
			if got := s.Generated(); !slices.Equal(got, tc.wantGenerated) {
				t.Errorf("Generated() = %q, want %q", got, tc.wantGenerated)
			}
			after := snapshot(t, dir)
			for _, m := range []map[string]string{before, after} {
				delete(m, installdir.State)
			}
			if !reflect.DeepEqual(before, after) {
				t.Errorf("--dir changed besides the state file:\nbefore %v\nafter  %v", before, after)
			}
			if got := readFile(t, dir, "auth/old-secret"); got != "hunter2\n" {
				t.Errorf("the retired asset's file is now %q; it must be left alone", got)
			}
			st, err := graph.ReadState(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, kept := st.Assets["old/secret"]
			raw := readFile(t, dir, installdir.State)
			if kept != tc.wantKept || strings.Contains(raw, "hunter2") != tc.wantKept {
				t.Errorf("state file keeps old/secret: %v, want %v:\n%s", kept, tc.wantKept, raw)
			}
			if parents := slices.Sorted(maps.Keys(st.Assets["man"].Parents)); !slices.Equal(parents, []string{"cert", "ic"}) {
				t.Errorf("man's parents = %q, want cert and ic", parents)
			}
		})
	}
}
