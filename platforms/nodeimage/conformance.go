package nodeimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
	dataconformance "github.com/kiln-project/kiln/data/conformance"
	"github.com/kiln-project/kiln/graph/atomicfile"
)

// Conformance is the upstream conformance suite of the pinned Kubernetes
// release, built from source into the kiln cache:
//
//	<cache>/conformance/<version>-<hash>/bin/      e2e.test, kubectl, the test images' Go programs
//	<cache>/conformance/<version>-<hash>/images.tar every test image, one docker-archive
//	<cache>/conformance/<version>-<hash>/images.txt the image references it holds, one a line
type Conformance struct {
	// Dir is the cache directory of this build.
	Dir string `json:"-"`
	// E2ETest is the e2e.test binary (go test -c k8s.io/kubernetes/test/e2e).
	E2ETest string `json:"e2eTest"`
	// Kubectl is kubectl at the same version, for the kubectl specs.
	Kubectl string `json:"kubectl"`
	// Ginkgo is the ginkgo CLI of the suite's ginkgo version: it runs
	// e2e.test in parallel processes.
	Ginkgo string `json:"ginkgo"`
	// Images is the docker-archive holding every test image, tagged with
	// its upstream name, for `kiln load image-archive`.
	Images string `json:"images"`
	// Refs are the image references in Images.
	Refs []string `json:"refs"`
	// Version is the Kubernetes version of the suite.
	Version string `json:"version"`
}

// conformanceFile is the metadata of a complete conformance build.
const conformanceFile = "conformance.json"

// e2ePackage is the package whose test binary is e2e.test: its e2e_test.go
// holds TestE2E, the entry point of the whole suite.
const e2ePackage = "k8s.io/kubernetes/test/e2e"

// e2eComponent is the conformance wrapper module: kubectl and the Go
// programs of the test images, with the Kubernetes version flags, so that
// the packages they share with the node image's build come from the Go
// build cache.
func e2eComponent(rel release.Release) component {
	return component{
		Name: "e2e", FS: dataconformance.FS,
		Version: rel.Kubernetes, StagingVersion: rel.KubernetesStaging,
		Packages: []string{
			"k8s.io/kubernetes/cmd/kubectl",
			"k8s.io/kubernetes/test/images/agnhost",
			"k8s.io/kubernetes/test/images/nonewprivs",
			"k8s.io/sample-apiserver",
			"github.com/onsi/ginkgo/v2/ginkgo",
		},
		Binaries: []string{"kubectl", "agnhost", "nonewprivs", "sample-apiserver", "ginkgo"},
		LDFlags:  kubernetesLDFlags(rel.Kubernetes),
	}
}

// e2eTestCmd returns the `go test -c` that builds e2e.test into out, with
// the same flags and environment as the component's `go build`. go vet of
// upstream's test package is skipped: it checks nothing of kiln's.
func e2eTestCmd(goBin, cacheDir string, c component, src, out string) command {
	ld := strings.Join(append([]string{"-s", "-w"}, c.LDFlags...), " ")
	return command{
		Path: goBin,
		Args: []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags", ld, "-o", filepath.Join(out, "e2e.test"), e2ePackage},
		Env:  goEnv(cacheDir, c.Cgo),
		Dir:  src,
	}
}

// e2eKey returns the cache key of the suite's binaries.
func e2eKey(goVersion string, c component, files map[string][]byte) string {
	h := newHasher("conformance-bin/v1")
	h.add("component", c.key(goVersion, files))
	cmd := e2eTestCmd("go", "", c, "", "")
	h.add("test-argv", strings.Join(cmd.Args, "\x00"))
	return h.sum()
}

// EnsureConformance returns the conformance suite of opts.Release,
// building whatever is not in the cache: e2e.test and kubectl from the Go
// module proxy, a Debian tree for the test images that need one, and the
// images archive. With nothing changed it only hashes its inputs. Building
// needs root (debootstrap, chroot) and Go.
func EnsureConformance(ctx context.Context, opts Options) (*Conformance, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	if b.goErr != nil {
		return nil, &PreconditionError{fmt.Errorf("the conformance suite is built from source: %w", b.goErr)}
	}
	unlock, err := atomicfile.Lock(b.cache, filepath.Join(b.cache, "conformance.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	out, err := b.ensureConformance(ctx)
	if pe := (*PreconditionError)(nil); err != nil && !errors.As(err, &pe) {
		return nil, fmt.Errorf("building the conformance suite: %w", err)
	}
	return out, err
}

func (b *builder) ensureConformance(ctx context.Context) (*Conformance, error) {
	c := e2eComponent(b.pinned())
	files, err := c.sources()
	if err != nil {
		return nil, err
	}
	binKey := e2eKey(b.goVersion, c, files)
	deps := map[string]component{}
	for _, dc := range components(b.pinned()) {
		if dc.Name == "etcd" || dc.Name == "pause" {
			deps[dc.Name] = dc
		}
	}
	key, err := conformanceKey(b.goVersion, binKey, deps)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.cache, "conformance", b.pinned().Kubernetes+"-"+key)
	if got, err := loadConformance(dir); err == nil {
		b.log.Debugf("conformance suite: cached in %s", dir)
		return got, nil
	}
	if os.Geteuid() != 0 {
		return nil, &PreconditionError{ErrNotRoot}
	}
	bin, err := b.ensureE2EBinaries(ctx, c, files, binKey)
	if err != nil {
		return nil, err
	}
	bins := map[string]string{"e2e.test": filepath.Join(bin, "e2e.test")}
	for _, n := range c.Binaries {
		bins[n] = filepath.Join(bin, n)
	}
	for name, dc := range deps {
		built, err := b.ensureComponent(ctx, dc)
		if err != nil {
			return nil, err
		}
		bins[name] = filepath.Join(built.Bin, name)
	}
	rootfs, err := b.ensureToolbox(ctx)
	if err != nil {
		return nil, err
	}
	busybox, err := b.ensureBusybox(ctx)
	if err != nil {
		return nil, err
	}
	tmp, err := scratch(dir)
	if err != nil {
		return nil, err
	}
	src := conformanceSources{
		rootfs: rootfs, bins: bins, busybox: busybox,
		module: filepath.Join(b.cache, "go", "mod", "k8s.io", "kubernetes@"+b.pinned().Kubernetes),
	}
	end := b.progress.Start("Writing the conformance test images")
	refs, err := b.writeConformanceImages(ctx, filepath.Join(tmp, "images.tar"), src)
	end(err)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "images.txt"), []byte(strings.Join(refs, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.Symlink(bin, filepath.Join(tmp, "bin")); err != nil {
		return nil, err
	}
	meta := Conformance{
		E2ETest: filepath.Join(dir, "bin", "e2e.test"), Kubectl: filepath.Join(dir, "bin", "kubectl"),
		Ginkgo: filepath.Join(dir, "bin", "ginkgo"),
		Images: filepath.Join(dir, "images.tar"), Refs: refs, Version: b.pinned().Kubernetes,
	}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, conformanceFile), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := publish(tmp, dir); err != nil {
		return nil, err
	}
	return loadConformance(dir)
}

// conformanceKey names a conformance build: the binaries' key, the node
// image components it reuses, the Debian tree and the image table.
func conformanceKey(goVersion, binKey string, deps map[string]component) (string, error) {
	h := newHasher("conformance/v1")
	h.add("bin", binKey)
	h.add("busybox", busyboxKey())
	for _, name := range []string{"etcd", "pause"} {
		dc := deps[name]
		files, err := dc.sources()
		if err != nil {
			return "", err
		}
		h.add("component:"+name, dc.key(goVersion, files))
	}
	h.add("toolbox", toolboxKey())
	table, err := json.Marshal(conformanceImages())
	if err != nil {
		return "", err
	}
	h.add("images", string(table))
	h.add("layers", conformanceLayersVersion)
	return h.sum(), nil
}

// loadConformance reads a complete conformance build in dir.
func loadConformance(dir string) (*Conformance, error) {
	data, err := os.ReadFile(filepath.Join(dir, conformanceFile))
	if err != nil {
		return nil, err
	}
	c := &Conformance{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, conformanceFile), err)
	}
	c.Dir = dir
	for _, f := range []string{c.E2ETest, c.Kubectl, c.Ginkgo, c.Images} {
		if !exists(f) {
			return nil, fmt.Errorf("conformance build %s incomplete: %s is missing", dir, f)
		}
	}
	return c, nil
}

// ensureE2EBinaries builds kubectl, the images' programs and e2e.test unless
// their cache entry exists, and returns the directory holding them.
func (b *builder) ensureE2EBinaries(ctx context.Context, c component, files map[string][]byte, key string) (string, error) {
	dir := filepath.Join(b.cache, "conformance", "bin-"+key)
	bin := filepath.Join(dir, "bin")
	complete := exists(filepath.Join(bin, "e2e.test"))
	for _, n := range c.Binaries {
		complete = complete && exists(filepath.Join(bin, n))
	}
	if complete {
		b.log.Debugf("conformance binaries: cached in %s", dir)
		return bin, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	tmp, err := scratch(dir)
	if err != nil {
		return "", err
	}
	src := filepath.Join(tmp, "src")
	if err := writeModule(src, files); err != nil {
		return "", err
	}
	out := filepath.Join(tmp, "bin")
	run := runner{log: b.log, update: b.progress.Update}
	steps := []struct {
		title string
		cmd   command
	}{
		{fmt.Sprintf("Building kubectl %s and the test images' programs (%s)", c.Version, strings.Join(c.Binaries[1:], ", ")),
			goBuildCmd(b.goBin, b.cache, c, src, out)},
		{fmt.Sprintf("Building e2e.test %s (go test -c %s)", c.Version, e2ePackage),
			e2eTestCmd(b.goBin, b.cache, c, src, out)},
	}
	for _, s := range steps {
		end := b.progress.Start(s.title)
		err := run.run(ctx, s.cmd)
		end(err)
		if err != nil {
			return "", err
		}
	}
	if err := publish(tmp, dir); err != nil {
		return "", err
	}
	return bin, nil
}
