package nodeimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
)

// Options configure Ensure and NewToolkit. Every field is optional.
type Options struct {
	// CacheDir is kiln's cache directory; empty means platforms.CacheDir(os.Getenv).
	CacheDir string
	// Log receives child tools' output at Debug level.
	Log logrus.FieldLogger
	// Progress reports each build step with its elapsed time.
	Progress platforms.Progress
	// Go is the go command that builds the components; empty finds it
	// (go on PATH, else /usr/local/go/bin/go).
	Go string
	// Release is the release whose image (or, through a Toolkit, whose
	// other artefacts) to build; the zero value means release.Default().
	// Images of different releases live side by side in the cache.
	Release release.Release
	// Proxy is install-config's proxy: kiln's own downloads (the go
	// command's modules, debootstrap's packages) go through it where
	// kiln's environment names no proxy (ProxyEnv). Nil for none.
	Proxy *types.Proxy
}

// Image is a built node image in the cache.
type Image struct {
	// Dir is the image's cache directory, holding RootFS and image.json.
	Dir string `json:"-"`
	// RootFS is the image's root tree. Use it read-only, as the lower
	// layer of each machine's copy-on-write root.
	RootFS string `json:"-"`
	// Hash is the content hash of everything the image was built from.
	Hash string `json:"hash"`
	// Inputs is the content hash of the same inputs without the Go
	// toolchain: a host without Go finds the image by it.
	Inputs string `json:"inputs,omitempty"`
	// Release is what the image contains.
	Release release.Info `json:"release"`
	// Packages are the Debian packages added to debootstrap's minbase.
	Packages []string `json:"packages"`
	// Mirror is the Debian mirror the base tree came from.
	Mirror string `json:"mirror,omitempty"`
}

// metadataFile is the name of the image's metadata in Image.Dir.
const metadataFile = "image.json"

// ErrNotRoot means the image must be built and the process is not root:
// debootstrap and chroot need root.
var ErrNotRoot = errors.New("building the node image needs root (debootstrap, chroot); run as root or use a cached image")

// PreconditionError is a problem the user fixes on the host or on the
// command line before an image can be built or exported: not running as
// root, no Go toolchain, no cache directory, an output path of an unknown
// kind or in a directory that cannot be written. Every other error is a
// failed build or export.
type PreconditionError struct {
	Err error
}

// Error returns the message of the wrapped error.
func (e *PreconditionError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PreconditionError) Unwrap() error { return e.Err }

// Ensure returns the node image of opts.Release, building whatever is
// not in the cache yet. With nothing changed it only hashes its inputs and
// returns. Concurrent calls (also from other processes) are serialized by
// a lock file in the cache directory.
//
// A host without Go can use a cached image but not build one: the image's
// key then cannot hash the Go toolchain, so Ensure takes a cached image
// built from the same inputs by any toolchain (Image.Inputs), and fails
// with a *PreconditionError naming the missing toolchain when there is none.
func Ensure(ctx context.Context, opts Options) (*Image, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	unlock, err := atomicfile.Lock(b.cache, filepath.Join(b.cache, "nodeimage.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	plan, err := b.plan()
	if err != nil {
		return nil, err
	}
	img, err := b.cached(plan)
	switch {
	case img != nil && b.goErr != nil:
		b.log.Debugf("node image %s: cached in %s (no Go toolchain: matched by its inputs %s)", img.Hash, img.Dir, img.Inputs)
		return img, nil
	case img != nil:
		b.log.Debugf("node image %s: cached in %s", img.Hash, img.Dir)
		return img, nil
	case b.goErr != nil:
		return nil, &PreconditionError{fmt.Errorf("node image (inputs %s) is not in the cache %s, and building it needs Go: %w", plan.inputs, b.cache, b.goErr)}
	}
	if os.Geteuid() != 0 {
		return nil, &PreconditionError{ErrNotRoot}
	}
	if exists(plan.dir) {
		b.log.Warnf("removing the incomplete node image %s (%v)", plan.dir, err)
		if err := os.RemoveAll(plan.dir); err != nil {
			return nil, err
		}
	}
	img, err = b.build(ctx, plan)
	if err != nil {
		return nil, fmt.Errorf("building the node image: %w", err)
	}
	return img, nil
}

// Cached returns the node image of opts.Release when the cache holds it
// complete, and nil (no error) when it does not; it builds nothing.
func Cached(opts Options) (*Image, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	plan, err := b.plan()
	if err != nil {
		return nil, err
	}
	img, _ := b.cached(plan)
	return img, nil
}

// PartsCached reports whether the base tree and every component build of
// opts' release are in the cache, so that Ensure only assembles the image
// (about a minute here) instead of building Kubernetes. A release whose
// image is cached has its parts cached too, unless they were deleted.
func PartsCached(opts Options) (bool, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return false, err
	}
	if _, complete := b.baseEntry(); !complete {
		return false, nil
	}
	for _, c := range Components(b.pinned()) {
		job, _, err := b.componentEntry(c)
		if err != nil {
			return false, err
		}
		if !job.complete() {
			return false, nil
		}
	}
	return true, nil
}

// cached returns p's complete image in the cache: the one of its key, or,
// without a Go toolchain, the newest built from the same inputs by any
// toolchain. When there is none the image is nil and, with a toolchain, the
// error says why p.dir holds no complete image.
func (b *builder) cached(p *plan) (*Image, error) {
	if b.goErr != nil {
		return newestImage(filepath.Join(b.cache, "images"), func(img *Image) bool { return img.Inputs == p.inputs }), nil
	}
	return load(p.dir)
}

// newestImage returns the newest complete image under dir (by the time
// its metadata was written) for which keep is true; nil when there is none.
func newestImage(dir string, keep func(*Image) bool) *Image {
	entries, _ := filepath.Glob(filepath.Join(dir, "node-*"))
	var (
		found  *Image
		newest time.Time
	)
	for _, d := range entries {
		img, err := load(d)
		if err != nil || !keep(img) {
			continue
		}
		st, err := os.Stat(filepath.Join(img.Dir, metadataFile))
		if err == nil && (found == nil || st.ModTime().After(newest)) {
			found, newest = img, st.ModTime()
		}
	}
	return found
}

// load reads the metadata of the image in dir.
func load(dir string) (*Image, error) {
	data, err := os.ReadFile(filepath.Join(dir, metadataFile))
	if err != nil {
		return nil, err
	}
	img := &Image{}
	if err := json.Unmarshal(data, img); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, metadataFile), err)
	}
	img.Dir, img.RootFS = dir, filepath.Join(dir, "rootfs")
	if _, err := os.Stat(filepath.Join(img.RootFS, "usr/bin/systemctl")); err != nil {
		return nil, fmt.Errorf("root tree incomplete: %w", err)
	}
	return img, nil
}

// builder carries what every build step needs.
type builder struct {
	cache     string
	hostRoot  string
	goBin     string
	goVersion string
	// goErr is why there is no Go toolchain; nil when there is one. Only
	// building needs it.
	goErr    error
	log      logrus.FieldLogger
	progress platforms.Progress
	run      runner
	// host is how a cgo component's C tools and libraries are looked for
	// (realHost outside tests).
	host hostProbe
	// rel is the release being built (see pinned); zero means the default.
	rel release.Release
	// env is what every child command gets besides kiln's environment:
	// install-config's proxy (ProxyEnv).
	env []string
}

func newBuilder(opts Options) (*builder, error) {
	b := &builder{cache: opts.CacheDir, hostRoot: "/", log: opts.Log, progress: opts.Progress, host: realHost(), rel: opts.Release,
		env: ProxyEnv(opts.Proxy, os.Getenv)}
	if b.log == nil {
		l := logrus.New()
		l.SetOutput(nopWriter{})
		b.log = l
	}
	if b.progress == nil {
		b.progress = platforms.NoProgress{}
	}
	if b.cache == "" {
		dir, err := platforms.CacheDir(os.Getenv)
		if err != nil {
			return nil, &PreconditionError{err}
		}
		b.cache = dir
	}
	if err := os.MkdirAll(b.cache, 0o755); err != nil {
		return nil, err
	}
	if len(b.env) > 0 {
		b.log.Debug("kiln's downloads (Go modules, Debian packages) go through install-config's proxy: kiln's environment names none")
	}
	b.run = b.runner(nil)
	b.goBin, b.goVersion, b.goErr = goToolchain(opts.Go)
	return b, nil
}

// pinned is the release being built: opts.Release, else the default.
func (b *builder) pinned() release.Release {
	if b.rel == (release.Release{}) {
		return release.Default()
	}
	return b.rel
}

// goToolchain returns the Go toolchain that builds the components (bin,
// or the one findGo finds when bin is empty) and its version, or why there
// is none.
func goToolchain(bin string) (string, string, error) {
	if bin == "" {
		var err error
		if bin, err = findGo(); err != nil {
			return "", "", err
		}
	}
	out, err := exec.Command(bin, "env", "GOVERSION").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s env GOVERSION: %w", bin, err)
	}
	return bin, strings.TrimSpace(string(out)), nil
}

// findGo returns the Go toolchain that builds the components: `go` on
// PATH, else /usr/local/go/bin/go.
func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if p := "/usr/local/go/bin/go"; exists(p) {
		return p, nil
	}
	return "", errors.New("no Go toolchain (go on PATH or /usr/local/go/bin/go), which builds the node image's components from source; see docs/node-image.md")
}

// nopWriter discards log output when no logger is given.
type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
