package remote

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPutFile: a file arrives whole with its mode and replaces the one
// there; a stream cut short leaves the old file and no temporary one; a
// link on the way, or at the file, is refused and written through by none.
func TestPutFile(t *testing.T) {
	c, srv, host := rootClient(t)
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "bundle.json")
	put := func(p, data string, size int) error {
		return c.PutFile(ctx, host, p, strings.NewReader(data), int64(size), 0o600)
	}
	if err := put(p, "first", 5); err != nil {
		t.Fatal(err)
	}
	if err := put(p, "second, longer", 14); err != nil {
		t.Fatal(err)
	}
	check := func(when, want string) {
		t.Helper()
		srv.waitIdle(t, 10*time.Second)
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s: the file holds %q (%v), want %q", when, got, err, want)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", when, st.Mode(), err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s: the directory holds %v, want only bundle.json", when, names)
		}
	}
	check("replaced", "second, longer")

	if err := put(p, "cut", 1000); err == nil || !strings.Contains(err.Error(), "ended early") {
		t.Errorf("a stream cut short: %v", err)
	}
	check("after a cut stream", "second, longer")

	// Links: a directory reached through one, and a file that is one.
	elsewhere := t.TempDir()
	link := filepath.Join(t.TempDir(), "kiln")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	if err := put(filepath.Join(link, "bundle.json"), "x", 1); err == nil || !strings.Contains(err.Error(), "no link") {
		t.Errorf("through a linked directory: %v", err)
	}
	target := filepath.Join(elsewhere, "target")
	if err := os.WriteFile(target, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(elsewhere, "linked")
	if err := os.Symlink(target, linked); err != nil {
		t.Fatal(err)
	}
	if err := put(linked, "x", 1); err == nil {
		t.Error("a file that is a link was replaced")
	}
	if got, _ := os.ReadFile(target); string(got) != "kept" {
		t.Errorf("the link's target holds %q", got)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 2 {
		t.Errorf("the linked directory holds %d entries, want 2", len(ents))
	}
	for _, bad := range []string{"relative", "/", "/a/../b"} {
		if err := put(bad, "x", 1); err == nil || !strings.Contains(err.Error(), "not a clean absolute path") {
			t.Errorf("put to %q: %v", bad, err)
		}
	}
}
