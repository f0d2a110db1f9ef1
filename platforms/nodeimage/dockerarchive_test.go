package nodeimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// readTar returns the entries of a tar stream: name -> header and content.
func readTar(t *testing.T, r io.Reader) (names []string, hdrs map[string]*tar.Header, data map[string][]byte) {
	t.Helper()
	hdrs, data = map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		hdrs[h.Name], data[h.Name] = h, b
	}
}

// testLayer is a layer of the test archives: its name, its history line
// and its entries.
type testLayer struct {
	name, createdBy string
	entries         []LayerEntry
}

// testImages is fixed content: one image like the node image's (one layer,
// an entrypoint), or three images sharing two layers like the conformance
// images. It returns the layers in the order they are added, and the
// directory of the program file they hold.
func testImages(t *testing.T, multi bool) ([]testLayer, []ArchiveImage, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	if err := os.WriteFile(bin, []byte("\x7fELF prog"), 0o700); err != nil {
		t.Fatal(err)
	}
	if !multi {
		etcd := testLayer{"etcd", "kiln build node-image", []LayerEntry{
			{Name: "usr/local/bin/etcd", Source: bin, Mode: 0o755},
			{Name: "/etc/passwd", Data: []byte("root:x:0:0::/:/bin/sh\n"), Mode: 0o644},
			{Name: "usr/sbin/iptables", Link: "/usr/sbin/xtables-nft-multi"},
			{Name: "tmp", Dir: true, Mode: 0o1777},
		}}
		return []testLayer{etcd}, []ArchiveImage{{Ref: "kiln.local/etcd:v3.6.16", Layers: []string{"etcd"}, Entrypoint: []string{"/usr/local/bin/etcd"}}}, dir
	}
	layers := []testLayer{
		{"base", "kiln build conformance: base", []LayerEntry{{Name: "bin/sh", Data: []byte("sh"), Mode: 0o755}, {Name: "tmp", Dir: true, Mode: 0o1777}}},
		{"prog", "kiln build conformance: prog", []LayerEntry{{Name: "prog", Source: bin, Mode: 0o4755}}},
	}
	images := []ArchiveImage{
		{Ref: "example.org/a:1", Layers: []string{"base", "prog"}, Entrypoint: []string{"/prog"}, Cmd: []string{"pause"}},
		{Ref: "example.org/a:0", Layers: []string{"base", "prog"}, Entrypoint: []string{"/prog"}, Cmd: []string{"pause"}},
		{Ref: "example.org/b:1", Layers: []string{"base"}, User: "1234", Cmd: []string{"/bin/sh"}},
	}
	return layers, images, dir
}

// testArchive is an archive of testImages, its layers staged.
func testArchive(t *testing.T, multi bool) (*dockerArchive, []ArchiveImage) {
	t.Helper()
	layers, images, dir := testImages(t, multi)
	a := newDockerArchive(dir)
	t.Cleanup(a.close)
	for _, l := range layers {
		if err := a.addLayer(l.name, l.createdBy, l.entries); err != nil {
			t.Fatal(err)
		}
	}
	return a, images
}

// write returns the archive of images.
func write(t *testing.T, a *dockerArchive, images []ArchiveImage) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := a.write(&b, images); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDockerArchiveReadsBack reads the archives back with
// go-containerregistry's docker-archive reader: every tag is there with
// its layers (each stored once) and its run configuration.
func TestDockerArchiveReadsBack(t *testing.T) {
	for _, multi := range []bool{false, true} {
		t.Run(fmt.Sprintf("multi=%v", multi), func(t *testing.T) {
			a, images := testArchive(t, multi)
			data := write(t, a, images)
			opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
			stored := map[string]bool{}
			for _, img := range images {
				tag, err := name.NewTag(img.Ref)
				if err != nil {
					t.Fatal(err)
				}
				got, err := tarball.Image(opener, &tag)
				if err != nil {
					t.Fatalf("%s: %v", img.Ref, err)
				}
				cfg, err := got.ConfigFile()
				if err != nil {
					t.Fatalf("%s: %v", img.Ref, err)
				}
				want := v1.Config{Entrypoint: img.Entrypoint, Cmd: img.Cmd, User: img.User, Env: []string{imagePath}, WorkingDir: "/"}
				if !reflect.DeepEqual(cfg.Config, want) || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || !cfg.Created.Equal(epoch) {
					t.Errorf("%s: config %+v, want %+v", img.Ref, cfg, want)
				}
				layers, err := got.Layers()
				if err != nil || len(layers) != len(img.Layers) || len(cfg.History) != len(img.Layers) {
					t.Fatalf("%s: %d layers, %d history entries (%v), want %d", img.Ref, len(layers), len(cfg.History), err, len(img.Layers))
				}
				for i, l := range layers {
					staged := a.layers[img.Layers[i]]
					diffID, err := l.DiffID()
					if err != nil || diffID.String() != "sha256:"+staged.hex || cfg.History[i].CreatedBy != staged.createdBy {
						t.Errorf("%s layer %d: diff ID %s (%v), history %q; want %s, %q", img.Ref, i, diffID, err, cfg.History[i].CreatedBy, staged.hex, staged.createdBy)
					}
					stored[staged.hex] = true
				}
			}
			names, _, _ := readTar(t, bytes.NewReader(data))
			var layerFiles []string
			for _, n := range names {
				if strings.HasSuffix(n, "/layer.tar") {
					layerFiles = append(layerFiles, n)
				}
			}
			if len(layerFiles) != len(stored) {
				t.Errorf("layer files %q, want each of the %d layers once", layerFiles, len(stored))
			}
		})
	}
}

// TestDockerArchiveLayer checks what a layer holds: entries sorted by
// name, every parent directory, the modes asked for, fixed owners and
// times.
func TestDockerArchiveLayer(t *testing.T) {
	a, images := testArchive(t, false)
	tag, _ := name.NewTag(images[0].Ref)
	data := write(t, a, images)
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	r, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	names, lh, ld := readTar(t, r)
	wantNames := []string{"etc/", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/etcd", "usr/sbin/", "usr/sbin/iptables"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("layer entries\n got %q\nwant %q", names, wantNames)
	}
	if string(ld["usr/local/bin/etcd"]) != "\x7fELF prog" || lh["usr/local/bin/etcd"].Mode != 0o755 {
		t.Errorf("etcd entry: mode %o content %q", lh["usr/local/bin/etcd"].Mode, ld["usr/local/bin/etcd"])
	}
	if h := lh["usr/sbin/iptables"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "/usr/sbin/xtables-nft-multi" {
		t.Errorf("iptables entry = %+v", h)
	}
	if h := lh["tmp/"]; h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("tmp entry: type %c mode %o", h.Typeflag, h.Mode)
	}
	for name, h := range lh {
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: uid %d gid %d mtime %v", name, h.Uid, h.Gid, h.ModTime)
		}
	}
}

// TestDockerArchiveIsStable checks that an archive is the same bytes each
// time and the same as testdata's digest: a change there changes the
// image IDs of every cached node image, and must be deliberate (-update).
func TestDockerArchiveIsStable(t *testing.T) {
	golden := filepath.Join("testdata", "docker-archive-"+runtime.GOARCH+".sha256")
	var got strings.Builder
	for _, multi := range []bool{false, true} {
		a, images := testArchive(t, multi)
		first, second := write(t, a, images), write(t, a, images)
		if !bytes.Equal(first, second) {
			t.Errorf("multi=%v: two writes differ", multi)
		}
		fmt.Fprintf(&got, "multi=%v sha256:%x\n", multi, sha256.Sum256(first))
	}
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if os.IsNotExist(err) {
		t.Skipf("no digests for %s in testdata (run with -update to write them)", runtime.GOARCH)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("archive digests\n got %s\nwant %s", got.String(), want)
	}
}

// TestDockerArchiveCleansUp checks that closing an archive removes its
// staged layers.
func TestDockerArchiveCleansUp(t *testing.T) {
	a, _ := testArchive(t, true)
	a.close()
	if left, _ := filepath.Glob(filepath.Join(a.dir, "layer-*")); len(left) != 0 {
		t.Errorf("temporary layer files left behind: %v", left)
	}
}

// TestDockerArchiveRefusesAMissingLayer checks that an image naming a
// layer never added is an error, not an archive that cannot be imported.
func TestDockerArchiveRefusesAMissingLayer(t *testing.T) {
	a, _ := testArchive(t, false)
	if err := a.write(io.Discard, []ArchiveImage{{Ref: "example.org/x:1", Layers: []string{"nope"}}}); err == nil {
		t.Error("an image with a missing layer was written")
	}
}

// TestWriteDockerArchive checks that WriteDockerArchive asks for each
// layer once, however many images share it, writes what the archive
// writer writes of the same layers, leaves no staged layer behind and
// names a layer that fails.
func TestWriteDockerArchive(t *testing.T) {
	layers, images, _ := testImages(t, true)
	byName := map[string]testLayer{}
	for _, l := range layers {
		byName[l.name] = l
	}
	dir := t.TempDir()
	var asked []string
	err := WriteDockerArchive(filepath.Join(dir, "images.tar"), images, func(name string) ([]LayerEntry, string, error) {
		asked = append(asked, name)
		return byName[name].entries, byName[name].createdBy, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"base", "prog"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("layers asked for %q, want %q", asked, want)
	}
	got, err := os.ReadFile(filepath.Join(dir, "images.tar"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := testArchive(t, true)
	if !bytes.Equal(got, write(t, a, images)) {
		t.Error("the archive differs from the archive writer's of the same layers")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "layer-*")); len(left) != 0 {
		t.Errorf("temporary layer files left behind: %v", left)
	}
	boom := errors.New("boom")
	err = WriteDockerArchive(filepath.Join(dir, "failed.tar"), images, func(string) ([]LayerEntry, string, error) { return nil, "", boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "layer base") {
		t.Errorf("a failing layer: err = %v, want boom naming layer base", err)
	}
}

func TestLayerConflict(t *testing.T) {
	err := writeLayer(io.Discard, []LayerEntry{
		{Name: "usr/bin/x", Data: []byte("a"), Mode: 0o755},
		{Name: "/usr/bin/x", Link: "/y"},
	})
	if err == nil {
		t.Fatal("two different entries for one path were accepted")
	}
}
