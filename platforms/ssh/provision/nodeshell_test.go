package provision

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostAddress: a node is reached at its host's address; a name that
// is no node of the cluster (the bootstrap host once it is done) is not.
func TestHostAddress(t *testing.T) {
	c := exampleCluster(t)
	if addr, err := hostAddress(c, "node3"); err != nil || addr != "192.168.10.13" {
		t.Errorf("node3: %q, %v", addr, err)
	}
	c.BootstrapDone = true
	if addr, err := hostAddress(c, "node1"); err == nil {
		t.Errorf("the bootstrap host after bootstrap-complete: %q", addr)
	}
}

// TestSized: what is left of a file or of a reader that knows its length
// is sent as it is; any other reader is read whole first.
func TestSized(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "snapshot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(4, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  io.Reader
		want string
	}{
		{"file at offset 4", f, "456789"},
		{"strings.Reader", strings.NewReader("bundle"), "bundle"},
		{"plain reader", io.MultiReader(strings.NewReader("a"), bytes.NewBufferString("bc")), "abc"},
	} {
		r, n, err := sized(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, _ := io.ReadAll(r)
		if n != int64(len(tc.want)) || string(got) != tc.want {
			t.Errorf("%s: %d bytes %q, want %q", tc.name, n, got, tc.want)
		}
	}
}
