package nodeimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

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

func TestImageArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "etcd")
	if err := os.WriteFile(bin, []byte("\x7fELF fake etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	a := imageArchive{
		Ref:        "kiln.local/etcd:v3.5.35",
		Entrypoint: []string{"/usr/local/bin/etcd"},
		Entries: []layerEntry{
			{Name: "usr/local/bin/etcd", Source: bin, Mode: 0o755},
			{Name: "/etc/passwd", Data: []byte("root:x:0:0::/:/bin/sh\n"), Mode: 0o644},
			{Name: "usr/sbin/iptables", Link: "/usr/sbin/xtables-nft-multi"},
			{Name: "tmp", Dir: true, Mode: 0o1777},
		},
	}
	var first, second bytes.Buffer
	if err := a.write(&first, dir); err != nil {
		t.Fatal(err)
	}
	if err := a.write(&second, dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two writes of the same image differ: the archive is not deterministic")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "layer-*")); len(left) != 0 {
		t.Errorf("temporary layer files left behind: %v", left)
	}

	_, hdrs, files := readTar(t, &first)
	var manifest []dockerManifest
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || !reflect.DeepEqual(manifest[0].RepoTags, []string{a.Ref}) || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest.json = %+v", manifest)
	}
	m := manifest[0]
	configData, ok := files[m.Config]
	if !ok {
		t.Fatalf("config %s missing", m.Config)
	}
	if sum := sha256.Sum256(configData); hex.EncodeToString(sum[:])+".json" != m.Config {
		t.Errorf("config file name %s is not its digest", m.Config)
	}
	var cfg imageConfig
	if err := json.Unmarshal(configData, &cfg); err != nil {
		t.Fatal(err)
	}
	layer, ok := files[m.Layers[0]]
	if !ok {
		t.Fatalf("layer %s missing", m.Layers[0])
	}
	layerSum := sha256.Sum256(layer)
	if want := []string{"sha256:" + hex.EncodeToString(layerSum[:])}; !reflect.DeepEqual(cfg.RootFS.DiffIDs, want) {
		t.Errorf("diff_ids %v, want %v", cfg.RootFS.DiffIDs, want)
	}
	if cfg.OS != "linux" || !reflect.DeepEqual(cfg.Config.Entrypoint, a.Entrypoint) || !cfg.Created.Equal(epoch) {
		t.Errorf("config = %+v", cfg)
	}
	for name, h := range hdrs {
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s has mtime %v", name, h.ModTime)
		}
	}

	names, lh, ld := readTar(t, bytes.NewReader(layer))
	wantNames := []string{"etc/", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/etcd", "usr/sbin/", "usr/sbin/iptables"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("layer entries\n got %q\nwant %q", names, wantNames)
	}
	if string(ld["usr/local/bin/etcd"]) != "\x7fELF fake etcd" || lh["usr/local/bin/etcd"].Mode != 0o755 {
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

func TestLayerConflict(t *testing.T) {
	err := writeLayer(io.Discard, []layerEntry{
		{Name: "usr/bin/x", Data: []byte("a"), Mode: 0o755},
		{Name: "/usr/bin/x", Link: "/y"},
	})
	if err == nil {
		t.Fatal("two different entries for one path were accepted")
	}
}
