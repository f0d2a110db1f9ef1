package infra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms"
)

// fakeLoader is a provisioner that can load images.
type fakeLoader struct {
	fakeProv
	infraID, path string
	nodes         []string
	err           error // what LoadImageArchive returns
}

func (f *fakeLoader) LoadImageArchive(_ context.Context, infraID, path string, nodes []string) error {
	f.infraID, f.path, f.nodes = infraID, path, nodes
	return f.err
}

func TestLoadImageArchive(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "images.tar")
	if err := os.WriteFile(archive, []byte("tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	ctx := context.Background()
	target := Target{InfraID: "demo-1", Platform: "local"}

	l := &fakeLoader{}
	if err := LoadImageArchive(ctx, target, l, "images.tar", []string{"demo-1-worker-0"}); err != nil {
		t.Fatal(err)
	}
	if l.infraID != "demo-1" || l.path != archive || !slices.Equal(l.nodes, []string{"demo-1-worker-0"}) {
		t.Errorf("loader got %q %q %q; want the absolute path", l.infraID, l.path, l.nodes)
	}

	for name, tc := range map[string]struct {
		platform string
		prov     platforms.Provisioner
		path     string
		want     string
	}{
		"platform without the ability": {"none", &fakeProv{}, archive, "platform none cannot load images"},
		"missing archive":              {"local", &fakeLoader{}, "missing.tar", "image archive: "},
		"directory":                    {"local", &fakeLoader{}, dir, "is not a regular file"},
	} {
		err := LoadImageArchive(ctx, Target{InfraID: "demo-1", Platform: tc.platform}, tc.prov, tc.path, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitcode.Of(err) != exitcode.Input {
			t.Errorf("%s: err = %v, want an input error with %q", name, err, tc.want)
		}
		if l, ok := tc.prov.(*fakeLoader); ok && l.path != "" {
			t.Errorf("%s: the loader was called", name)
		}
	}

	// What the loader returns is classified here, at the edge: a failure
	// on the machines is an infrastructure error, a node the cluster does
	// not have is the user's to fix.
	for name, tc := range map[string]struct {
		err  error
		want exitcode.Kind
	}{
		"machine not running": {errors.New("machine demo-1-worker-0 is stopped"), exitcode.Infrastructure},
		"unknown node": {fmt.Errorf("load: %w", &platforms.UnknownNodesError{InfraID: "demo-1", Unknown: []string{"x"},
			Nodes: []string{"demo-1-master-0"}}), exitcode.Input},
	} {
		err := LoadImageArchive(ctx, target, &fakeLoader{err: tc.err}, archive, nil)
		if !errors.Is(err, tc.err) || exitcode.Of(err) != tc.want {
			t.Errorf("%s: err = %v (kind %d), want %v of kind %d", name, err, exitcode.Of(err), tc.err, tc.want)
		}
	}
}
