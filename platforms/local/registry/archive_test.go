package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// testLayer is a layer of a test archive: a small tar, stored as it is or
// gzip-compressed, under name.
type testLayer struct {
	file    string // the member holding it
	content []byte // the uncompressed tar
	gzip    bool
}

// stored returns the bytes of the member.
func (l testLayer) stored(t *testing.T) []byte {
	if !l.gzip {
		return l.content
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(l.content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testImage is an image of a test archive.
type testImage struct {
	refs   []string
	layers []testLayer
}

// layerTar returns a one-file tar holding text.
func layerTar(t *testing.T, name, text string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(text)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(text))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeArchive writes a docker-archive of images (each layer member
// written once) and returns its path.
func writeArchive(t *testing.T, images []testImage) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "images.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	written := map[string]bool{}
	var manifest []dockerManifestItem
	for i, img := range images {
		var cfg imageConfig
		item := dockerManifestItem{RepoTags: img.refs}
		for _, l := range img.layers {
			cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, digestOf(l.content))
			item.Layers = append(item.Layers, l.file)
			if !written[l.file] {
				written[l.file] = true
				add(l.file, l.stored(t))
			}
		}
		data, _ := json.Marshal(cfg)
		item.Config = hex.EncodeToString([]byte{byte(i)}) + ".json"
		add(item.Config, data)
		manifest = append(manifest, item)
	}
	data, _ := json.Marshal(manifest)
	add("manifest.json", data)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestArchiveImages reads the layers of a docker-archive as Push sends
// them: an uncompressed layer under its diff ID, a compressed OCI blob
// under its file name's digest, a compressed legacy member under the
// digest of its bytes; each member's bytes read back exactly.
func TestArchiveImages(t *testing.T) {
	plain := testLayer{file: "aaaa/layer.tar", content: layerTar(t, "a", "plain")}
	gz := testLayer{content: layerTar(t, "b", "gzipped"), gzip: true}
	gzStored := gz.stored(t)
	gz.file = "blobs/sha256/" + digestOf(gzStored)[len("sha256:"):]
	legacy := testLayer{file: "cccc/layer.tar", content: layerTar(t, "c", "legacy gzip"), gzip: true}
	path := writeArchive(t, []testImage{{refs: []string{"registry.k8s.io/x:1"}, layers: []testLayer{plain, gz, legacy}}})
	a, err := openArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	imgs, err := a.images()
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || len(imgs[0].Layers) != 3 || imgs[0].Refs[0] != "registry.k8s.io/x:1" {
		t.Fatalf("images = %+v", imgs)
	}
	want := []struct {
		mediaType, digest string
		data              []byte
	}{
		{mediaTypeLayer, digestOf(plain.content), plain.content},
		{mediaTypeLayerGzip, digestOf(gzStored), gzStored},
		{mediaTypeLayerGzip, digestOf(legacy.stored(t)), legacy.stored(t)},
	}
	for i, w := range want {
		l := imgs[0].Layers[i]
		got, _ := io.ReadAll(l.open())
		if l.MediaType != w.mediaType || l.Digest != w.digest || l.Size != int64(len(w.data)) || !bytes.Equal(got, w.data) {
			t.Errorf("layer %d = %s %s %d bytes, want %s %s %d bytes (content equal: %v)",
				i, l.MediaType, l.Digest, l.Size, w.mediaType, w.digest, len(w.data), bytes.Equal(got, w.data))
		}
	}
	cfg, _ := io.ReadAll(imgs[0].Config.open())
	if imgs[0].Config.Digest != digestOf(cfg) || imgs[0].Config.MediaType != mediaTypeConfig {
		t.Errorf("config blob = %+v", imgs[0].Config)
	}
}

func TestArchiveWithoutManifest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oci.tar")
	f, _ := os.Create(path)
	tw := tar.NewWriter(f)
	tw.WriteHeader(&tar.Header{Name: "index.json", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("{}"))
	tw.Close()
	f.Close()
	a, err := openArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.images(); !errors.Is(err, ErrNotDockerArchive) {
		t.Errorf("images() error = %v, want ErrNotDockerArchive", err)
	}
}
