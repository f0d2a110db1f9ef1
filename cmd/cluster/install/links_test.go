package install

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/cmd/cluster/infra"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/atomicfile/atomicfiletest"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
)

// fakeGatherer gathers one log file.
type fakeGatherer struct{ platforms.Provisioner }

func (fakeGatherer) Gather(_ context.Context, _, _, dir string) error {
	return os.WriteFile(filepath.Join(dir, "journal.log"), []byte("log"), 0o600)
}

// TestDirWritersRefuseSymlinks: what the cluster commands write into --dir
// (the shape record, the bootstrap-complete record, the log bundle, the
// restored install-config and the removals of a destroy) never goes
// through a symbolic link planted there: the error names the link and
// nothing outside --dir changes.
func TestDirWritersRefuseSymlinks(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	log := logrus.New()
	log.SetOutput(io.Discard)
	cases := []struct {
		name, link string
		// dir says the link points at the outside directory, else at a
		// file in it.
		dir bool
		run func(dir string) error
	}{
		{name: "shape record", link: ".kiln", dir: true,
			run: func(dir string) error { return machineset.SaveShape(dir, machineset.ShapeRecord{}) }},
		{name: "shape record file", link: installdir.Shape,
			run: func(dir string) error { return machineset.SaveShape(dir, machineset.ShapeRecord{}) }},
		{name: "bootstrap-complete record", link: ".kiln", dir: true,
			run: func(dir string) error { return (&Cluster{Cluster: platforms.Cluster{Dir: dir}}).recordBootstrap() }},
		{name: "log bundle", link: "log-bundle-20250102-030405.tar.gz",
			run: func(dir string) error {
				_, err := infra.Gather(context.Background(), dir, infra.Target{InfraID: "demo-1"}, fakeGatherer{}, now)
				return err
			}},
		{name: "destroy removes through a linked directory", link: ".kiln", dir: true,
			run: func(dir string) error {
				return infra.Destroy(context.Background(), dir, infra.Target{InfraID: "demo-1"}, &fakeProv{}, log)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			area := t.TempDir()
			dir, outside := filepath.Join(area, "dir"), filepath.Join(area, "outside")
			for _, d := range []string{dir, outside, filepath.Join(outside, "terraform")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(outside, "precious"), []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(outside, "precious")
			if tc.dir {
				target = outside
			}
			link := filepath.Join(dir, filepath.FromSlash(tc.link))
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			before := atomicfiletest.Tree(t, outside)
			err := tc.run(dir)
			var se *atomicfile.SymlinkError
			if !errors.As(err, &se) || se.Path != link {
				t.Fatalf("err = %v; want an *atomicfile.SymlinkError for %s", err, link)
			}
			if after := atomicfiletest.Tree(t, outside); !maps.Equal(before, after) {
				t.Errorf("outside --dir changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
