package registry

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
)

var testNames = Names{Self: "localhost:5001", Mirrors: []string{"kiln.local", "registry.k8s.io", "docker.io"}}

// TestPush pushes an archive of three images sharing a base layer: each
// reference of a mirrored registry or of the registry itself is stored
// under its destination, the shared layer is uploaded once and mounted
// into the other repositories, another registry's reference is skipped,
// and a second push sends no blob.
func TestPush(t *testing.T) {
	base := testLayer{file: "base/layer.tar", content: layerTar(t, "etc/os-release", "ID=debian\n")}
	kitten := testLayer{file: "kitten/layer.tar", content: layerTar(t, "kitten.jpg", "meow")}
	app := testLayer{file: "app/layer.tar", content: layerTar(t, "app", "#!/bin/sh\n"), gzip: true}
	path := writeArchive(t, []testImage{
		{refs: []string{"registry.k8s.io/e2e-test-images/kitten:1.8"}, layers: []testLayer{base, kitten}},
		{refs: []string{"localhost:5001/team/app:v1", "quay.io/team/app:v1"}, layers: []testLayer{base, app}},
		{refs: []string{"kiln.local/pause:3.10"}, layers: []testLayer{base}},
	})
	reg, addr := newFakeRegistry(t)
	p := &Pusher{Addr: addr, Names: testNames}
	res, err := p.Push(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"registry.k8s.io/e2e-test-images/kitten:1.8", "localhost:5001/team/app:v1", "kiln.local/pause:3.10"}; !slices.Equal(res.Pushed, want) {
		t.Errorf("pushed %q, want %q", res.Pushed, want)
	}
	if !slices.Equal(res.Skipped, []string{"quay.io/team/app:v1"}) {
		t.Errorf("skipped %q", res.Skipped)
	}
	for _, tt := range []struct {
		repo, tag string
		layers    []string
	}{
		{"registry.k8s.io/e2e-test-images/kitten", "1.8", []string{digestOf(base.content), digestOf(kitten.content)}},
		{"team/app", "v1", []string{digestOf(base.content), digestOf(app.stored(t))}},
		{"kiln.local/pause", "3.10", []string{digestOf(base.content)}},
	} {
		m := reg.manifest(t, tt.repo, tt.tag)
		var got []string
		for _, l := range m.Layers {
			got = append(got, l.Digest)
		}
		if m.MediaType != mediaTypeManifest || !slices.Equal(got, tt.layers) {
			t.Errorf("%s:%s = %+v, want layers %q", tt.repo, tt.tag, m, tt.layers)
		}
	}
	if n := reg.uploads[digestOf(base.content)]; n != 1 || reg.mounts != 2 {
		t.Errorf("the shared layer was uploaded %d times and mounted %d times, want 1 and 2", n, reg.mounts)
	}
	before := len(reg.uploads)
	uploads := 0
	for _, n := range reg.uploads {
		uploads += n
	}
	if _, err := p.Push(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	again := 0
	for _, n := range reg.uploads {
		again += n
	}
	if again != uploads || len(reg.uploads) != before {
		t.Errorf("a second push uploaded %d more blobs, want none", again-uploads)
	}
}

// A registry that refuses the upload is reported as a *StatusError with
// its status.
func TestPushRefused(t *testing.T) {
	path := writeArchive(t, []testImage{{refs: []string{"localhost:5001/app:v1"},
		layers: []testLayer{{file: "l/layer.tar", content: layerTar(t, "a", "b")}}}})
	reg, addr := newFakeRegistry(t)
	reg.refuse = http.StatusMethodNotAllowed
	_, err := (&Pusher{Addr: addr, Names: testNames}).Push(context.Background(), path)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusMethodNotAllowed || se.Method != http.MethodPost {
		t.Errorf("Push error = %v, want a *StatusError for the POST with 405", err)
	}
}
