package nodeimage

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
)

// Toolkit lends the node image builder's machinery to builds outside this
// package that share its cache, its Go environment and its component
// builds: test/conformance/suite builds the upstream conformance suite with
// it. With the package's functions on the cache (NewHasher, Scratch,
// Publish), the Go builds (Components, GoBuildCmd, GoEnv, WriteModule) and
// the images (WriteDockerArchive, BaseFiles), it is all such a build needs.
type Toolkit struct {
	b *builder
}

// NewToolkit returns the toolkit of opts, set up as Ensure sets up a build:
// the cache directory (created when missing), the logger, the progress
// reporter and the Go toolchain. A host without Go is no error here; Go
// says so.
func NewToolkit(opts Options) (*Toolkit, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	return &Toolkit{b: b}, nil
}

// Release returns the release being built: Options.Release, else
// release.Default().
func (t *Toolkit) Release() release.Release { return t.b.pinned() }

// CacheDir returns kiln's cache directory.
func (t *Toolkit) CacheDir() string { return t.b.cache }

// Log returns the logger that receives child tools' output at Debug level.
func (t *Toolkit) Log() logrus.FieldLogger { return t.b.log }

// Progress returns the reporter of build steps.
func (t *Toolkit) Progress() platforms.Progress { return t.b.progress }

// Go returns the go command that builds the components and its version
// (go env GOVERSION, part of every build's cache key), or why there is no
// Go toolchain.
func (t *Toolkit) Go() (bin, version string, err error) {
	return t.b.goBin, t.b.goVersion, t.b.goErr
}

// EnsureComponent builds c unless its cache entry exists, as Ensure builds
// the node image's components (one progress step), and returns the
// directory holding c.Binaries.
func (t *Toolkit) EnsureComponent(ctx context.Context, c Component) (string, error) {
	built, err := t.b.ensureComponent(ctx, c)
	return built.Bin, err
}

// Run runs c, sending its output line by line to the log and, when update
// is not nil, to update; its error quotes the output's last lines.
func (t *Toolkit) Run(ctx context.Context, c Command, update func(line string)) error {
	return t.b.runner(update).run(ctx, c)
}

// Output runs c and returns its standard output; its standard error goes
// to the log.
func (t *Toolkit) Output(ctx context.Context, c Command) (string, error) {
	return t.b.run.output(ctx, c, true)
}

// DebianMirror returns the host's apt mirror of the node image's Debian
// suite (release.DebianSuite), the one its base tree comes from.
func (t *Toolkit) DebianMirror() (string, error) {
	return detectMirror(t.b.hostRoot, release.DebianSuite)
}
