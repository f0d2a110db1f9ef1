package nodeimage

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/release"
)

// TestEnsureWithoutGo: a host without a Go toolchain uses a cached image
// built from the same inputs by any toolchain - the newest of several - and
// never needs Go for it; with no such image the error is a
// *PreconditionError (nothing is built).
func TestEnsureWithoutGo(t *testing.T) {
	cache := t.TempDir()
	noGo := Options{CacheDir: cache, Go: filepath.Join(t.TempDir(), "go")}
	b, err := newBuilder(noGo)
	if err != nil {
		t.Fatal(err)
	}
	if b.goErr == nil {
		t.Fatal("a missing go command was taken for a toolchain")
	}
	p, err := b.plan()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(context.Background(), noGo); !errors.As(err, new(*PreconditionError)) {
		t.Fatalf("empty cache without Go: %v, want a *PreconditionError", err)
	}
	image := func(hash, inputs string, age time.Duration) string {
		return fakeImage(t, cache, hash, inputs, release.Default(), age)
	}
	image("other", "other-inputs", 0)
	image("old", "", 0) // built before images recorded their inputs
	if _, err := Ensure(context.Background(), noGo); !errors.As(err, new(*PreconditionError)) {
		t.Fatalf("no image of these inputs: %v, want a *PreconditionError", err)
	}
	image("go1-26-8", p.inputs, time.Hour)
	newer := image("go1-26-9", p.inputs, time.Minute)
	img, err := Ensure(context.Background(), noGo)
	if err != nil {
		t.Fatal(err)
	}
	if img.Dir != newer || img.RootFS != filepath.Join(newer, "rootfs") {
		t.Errorf("Ensure = %s, want the newest image of the inputs %s", img.Dir, newer)
	}
}

// TestInputsKeyLeavesGoOut: the inputs key is the image key without the
// toolchain, so images built by two toolchains share it and only it.
func TestInputsKeyLeavesGoOut(t *testing.T) {
	var keys, inputs []string
	for _, v := range []string{"go1.26.8", "go1.26.9"} {
		b := &builder{cache: "/cache", goVersion: v}
		p, err := b.plan()
		if err != nil {
			t.Fatal(err)
		}
		keys, inputs = append(keys, p.key), append(inputs, p.inputs)
	}
	if keys[0] == keys[1] || inputs[0] != inputs[1] || inputs[0] == keys[0] {
		t.Errorf("keys %v, inputs %v: want two keys and one inputs key apart from them", keys, inputs)
	}
}

// TestReleasesHaveTheirOwnImages: each release's image has a key of its
// own, and Cached finds only the release asked for, building nothing.
func TestReleasesHaveTheirOwnImages(t *testing.T) {
	cache := t.TempDir()
	older, err := release.Lookup("v1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]release.Release{}
	for _, r := range release.Releases() {
		b := &builder{cache: cache, goVersion: "go1.26.8", rel: r}
		p, err := b.plan()
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := keys[p.key]; dup {
			t.Fatalf("%s and %s share the image key %s", prev.Kubernetes, r.Kubernetes, p.key)
		}
		keys[p.key] = r
	}
	def := &builder{cache: cache, goVersion: "go1.26.8"}
	p, err := def.plan()
	if err != nil {
		t.Fatal(err)
	}
	if keys[p.key] != release.Default() {
		t.Errorf("a builder without a release has key %s, not the default release's", p.key)
	}
	goBin := filepath.Join(t.TempDir(), "go") // no toolchain: matched by inputs
	if img, err := Cached(Options{CacheDir: cache, Go: goBin, Release: older}); img != nil || err != nil {
		t.Fatalf("empty cache: Cached = %v, %v", img, err)
	}
	ob := &builder{cache: cache, rel: older}
	op, err := ob.plan()
	if err != nil {
		t.Fatal(err)
	}
	dir := fakeImage(t, cache, "older", op.inputs, older, 0)
	img, err := Cached(Options{CacheDir: cache, Go: goBin, Release: older})
	if err != nil || img == nil || img.Dir != dir || img.Release.Kubernetes != "v1.35.4" {
		t.Fatalf("Cached(v1.35.4) = %+v, %v, want %s", img, err, dir)
	}
	if img, err := Cached(Options{CacheDir: cache, Go: goBin}); img != nil || err != nil {
		t.Errorf("Cached(default) found %v, %v: only v1.35.4's image is cached", img, err)
	}
}

// fakeImage writes a complete-looking image of rel into cache's images
// directory, its metadata age old, and returns its directory.
func fakeImage(t *testing.T, cache, hash, inputs string, rel release.Release, age time.Duration) string {
	t.Helper()
	dir := filepath.Join(cache, "images", "node-"+hash)
	if err := os.MkdirAll(filepath.Join(dir, "rootfs/usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rootfs/usr/bin/systemctl"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, err := json.Marshal(Image{Hash: hash, Inputs: inputs, Release: rel.Info()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, metadataFile), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-age)
	if err := os.Chtimes(filepath.Join(dir, metadataFile), when, when); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPartsCached: a release's parts are cached only once the base tree
// and every one of its component builds are.
func TestPartsCached(t *testing.T) {
	older, err := release.Lookup("v1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{CacheDir: t.TempDir(), Go: filepath.Join(t.TempDir(), "go"), Release: older}
	touch := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := newBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	comps := Components(b.pinned())
	for i, c := range comps {
		if ok, err := PartsCached(opts); ok || err != nil {
			t.Fatalf("%d of %d components cached, no base tree: PartsCached = %v, %v", i, len(comps), ok, err)
		}
		job, _, err := b.componentEntry(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Binaries {
			touch(filepath.Join(job.Bin, n))
		}
	}
	if ok, err := PartsCached(opts); ok || err != nil {
		t.Fatalf("every component, no base tree: PartsCached = %v, %v", ok, err)
	}
	base, _ := b.baseEntry()
	touch(filepath.Join(base.rootfs(), "usr/bin/systemctl"))
	if ok, err := PartsCached(opts); !ok || err != nil {
		t.Fatalf("everything cached: PartsCached = %v, %v", ok, err)
	}
	if ok, err := PartsCached(Options{CacheDir: opts.CacheDir, Go: opts.Go}); ok || err != nil {
		t.Errorf("the default release's components are not cached: PartsCached = %v, %v", ok, err)
	}
}
