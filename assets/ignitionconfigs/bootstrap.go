package ignitionconfigs

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var _ graph.WritableAsset = (*Bootstrap)(nil)

// Bootstrap is bootstrap.ign: BootstrapBase (the temporary control plane
// as static pods, the machine-config server with the full master and worker
// configs) plus bootkube with every manifest to apply.
type Bootstrap struct {
	File *graph.File `json:"file"`
}

// ID implements graph.Asset.
func (*Bootstrap) ID() string { return "ignition/bootstrap" }

// Name implements graph.Asset.
func (*Bootstrap) Name() string { return "bootstrap Ignition config" }

// Dependencies implements graph.Asset.
func (*Bootstrap) Dependencies() []graph.Asset {
	deps := []graph.Asset{&BootstrapBase{}, &manifests.UserManifests{}}
	for _, o := range manifests.Objects() {
		deps = append(deps, o)
	}
	return deps
}

// Generate implements graph.Asset.
func (b *Bootstrap) Generate(_ context.Context, p graph.Parents) error {
	base, user := &BootstrapBase{}, &manifests.UserManifests{}
	objects := manifests.Objects()
	parents := []graph.Asset{base, user}
	for _, o := range objects {
		parents = append(parents, o)
	}
	if err := p.Get(parents...); err != nil {
		return err
	}
	cfg := base.Config
	// Marshal sorts these lists in place: keep base's own untouched.
	cfg.Storage.Files = slices.Clone(cfg.Storage.Files)
	cfg.Storage.Directories = slices.Clone(cfg.Storage.Directories)
	cfg.Storage.Links = slices.Clone(cfg.Storage.Links)
	cfg.Systemd.Units = slices.Clone(cfg.Systemd.Units)
	for _, o := range objects {
		addFileSet(&cfg, nodelayout.BootstrapManifestsDir, o.Files(), 0o600)
	}
	// The user's manifests go beside kiln's: kubectl apply -f <dir> takes
	// them all in file-name order.
	addFileSet(&cfg, nodelayout.BootstrapManifestsDir, user.Files(), 0o600)
	if names := user.Paths(); len(names) > 0 {
		ignition.AddFile(&cfg, nodelayout.BootstrapUserManifestsList, 0o644, []byte(strings.Join(names, "\n")+"\n"))
	}
	data, err := ignition.Marshal(cfg)
	if err != nil {
		return err
	}
	b.File = &graph.File{Path: installdir.Ignition("bootstrap"), Data: data, Mode: 0o600}
	return nil
}

// Files implements graph.WritableAsset.
func (b *Bootstrap) Files() []*graph.File { return []*graph.File{b.File} }

// Load implements graph.WritableAsset: a bootstrap.ign on disk is used as is.
func (b *Bootstrap) Load(f graph.FileFetcher) (bool, error) {
	return loadIgnition(f, installdir.Ignition("bootstrap"), 0o600, &b.File)
}

// String keeps the keys in the config out of formatted output.
func (b *Bootstrap) String() string { return installdir.Ignition("bootstrap") }

// InputKind implements graph.Sized.
func (*Bootstrap) InputKind() graph.Input { return graph.IgnitionInput }

// InputKind implements graph.Sized for master.ign and worker.ign.
func (*pointer) InputKind() graph.Input { return graph.IgnitionInput }

func fileNamed(files []*graph.File, name string) *graph.File {
	for _, f := range files {
		if baseName(f.Path) == name {
			return f
		}
	}
	return nil
}

// loadIgnition reads an Ignition config from --dir and checks it with
// Ignition's validator, so a hand-edited config is caught here rather than
// on a machine that never joins.
func loadIgnition(f graph.FileFetcher, path string, mode int, dst **graph.File) (bool, error) {
	file, err := f.FetchByName(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := ignition.Validate(file.Data); err != nil {
		return false, &graph.InputError{Err: &pathError{path, err}}
	}
	file.Mode = fs.FileMode(mode)
	*dst = file
	return true, nil
}

// pathError names the file an input problem is in.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
