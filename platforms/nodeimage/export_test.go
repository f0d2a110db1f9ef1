package nodeimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

func TestExport(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/a"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "usr/bin/a"), filepath.Join(root, "usr/bin/b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	img := &Image{Dir: dir, RootFS: root}
	out := filepath.Join(dir, "node.tar.gz")
	if err := img.Export(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	_, hdrs, data := readTar(t, zr)
	tests := []struct {
		name     string
		typeflag byte
		link     string
	}{
		{"bin", tar.TypeSymlink, "usr/bin"},
		{"usr/", tar.TypeDir, ""},
		{"usr/bin/a", tar.TypeReg, ""},
		{"usr/bin/b", tar.TypeLink, "usr/bin/a"},
	}
	for _, tt := range tests {
		h, ok := hdrs[tt.name]
		if !ok {
			t.Errorf("%s missing from the export", tt.name)
			continue
		}
		if h.Typeflag != tt.typeflag || h.Linkname != tt.link {
			t.Errorf("%s: type %c link %q, want %c %q", tt.name, h.Typeflag, h.Linkname, tt.typeflag, tt.link)
		}
	}
	if string(data["usr/bin/a"]) != "binary" {
		t.Errorf("usr/bin/a content %q", data["usr/bin/a"])
	}
	if err := img.Export(context.Background(), filepath.Join(dir, "node.zip")); err == nil {
		t.Error("an unknown archive suffix was accepted")
	}
	// An export that fails half-way keeps the old archive and leaves no
	// temporary file.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := img.Export(ctx, out); err == nil {
		t.Error("an export with a cancelled context succeeded")
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("the earlier export is gone after a failed one: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, atomicfile.TempPrefix+"*")); len(left) > 0 {
		t.Errorf("temporary export files left behind: %v", left)
	}
}
