package suite

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
	"github.com/kiln-project/kiln/platforms/nodeimage"
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
func e2eComponent(rel release.Release) nodeimage.Component {
	return nodeimage.Component{
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
		LDFlags:  nodeimage.KubernetesLDFlags(rel.Kubernetes),
	}
}

// e2eTestCmd returns the `go test -c` that builds e2e.test into out, with
// the same flags and environment as the component's `go build`. go vet of
// upstream's test package is skipped: it checks nothing of kiln's.
func e2eTestCmd(goBin, cacheDir string, c nodeimage.Component, src, out string) nodeimage.Command {
	ld := strings.Join(append([]string{"-s", "-w"}, c.LDFlags...), " ")
	return nodeimage.Command{
		Path: goBin,
		Args: []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags", ld, "-o", filepath.Join(out, "e2e.test"), e2ePackage},
		Env:  nodeimage.GoEnv(cacheDir, c.Cgo),
		Dir:  src,
	}
}

// e2eKey returns the cache key of the suite's binaries.
func e2eKey(goVersion string, c nodeimage.Component, files map[string][]byte) string {
	h := nodeimage.NewHasher("conformance-bin/v1")
	h.Add("component", c.Key(goVersion, files))
	cmd := e2eTestCmd("go", "", c, "", "")
	h.Add("test-argv", strings.Join(cmd.Args, "\x00"))
	return h.Sum()
}

// EnsureConformance returns the conformance suite of opts.Release,
// building whatever is not in the cache: e2e.test and kubectl from the Go
// module proxy, a Debian tree for the test images that need one, and the
// images archive. With nothing changed it only hashes its inputs. Building
// needs root (debootstrap, chroot) and Go; their absence is a
// *nodeimage.PreconditionError.
func EnsureConformance(ctx context.Context, opts nodeimage.Options) (*Conformance, error) {
	tk, err := nodeimage.NewToolkit(opts)
	if err != nil {
		return nil, err
	}
	b := &builder{Toolkit: tk}
	if b.goBin, b.goVersion, err = tk.Go(); err != nil {
		return nil, &nodeimage.PreconditionError{Err: fmt.Errorf("the conformance suite is built from source: %w", err)}
	}
	unlock, err := atomicfile.Lock(tk.CacheDir(), filepath.Join(tk.CacheDir(), "conformance.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	out, err := b.ensureConformance(ctx)
	if pe := (*nodeimage.PreconditionError)(nil); err != nil && !errors.As(err, &pe) {
		return nil, fmt.Errorf("building the conformance suite: %w", err)
	}
	return out, err
}

// builder is the node image's toolkit with the Go toolchain it found.
type builder struct {
	*nodeimage.Toolkit
	goBin, goVersion string
}

func (b *builder) ensureConformance(ctx context.Context) (*Conformance, error) {
	rel := b.Release()
	c := e2eComponent(rel)
	files, err := c.Sources()
	if err != nil {
		return nil, err
	}
	binKey := e2eKey(b.goVersion, c, files)
	deps := map[string]nodeimage.Component{}
	for _, dc := range nodeimage.Components(rel) {
		if dc.Name == "etcd" || dc.Name == "pause" {
			deps[dc.Name] = dc
		}
	}
	key, err := conformanceKey(b.goVersion, binKey, deps)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.CacheDir(), "conformance", rel.Kubernetes+"-"+key)
	if got, err := loadConformance(dir); err == nil {
		b.Log().Debugf("conformance suite: cached in %s", dir)
		return got, nil
	}
	if os.Geteuid() != 0 {
		return nil, &nodeimage.PreconditionError{Err: nodeimage.ErrNotRoot}
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
		built, err := b.EnsureComponent(ctx, dc)
		if err != nil {
			return nil, err
		}
		bins[name] = filepath.Join(built, name)
	}
	rootfs, err := b.ensureToolbox(ctx)
	if err != nil {
		return nil, err
	}
	busybox, err := b.ensureBusybox(ctx)
	if err != nil {
		return nil, err
	}
	tmp, err := nodeimage.Scratch(dir)
	if err != nil {
		return nil, err
	}
	src := conformanceSources{
		rootfs: rootfs, bins: bins, busybox: busybox,
		module: filepath.Join(b.CacheDir(), "go", "mod", "k8s.io", "kubernetes@"+rel.Kubernetes),
	}
	end := b.Progress().Start("Writing the conformance test images")
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
		Images: filepath.Join(dir, "images.tar"), Refs: refs, Version: rel.Kubernetes,
	}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, conformanceFile), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := nodeimage.Publish(tmp, dir); err != nil {
		return nil, err
	}
	return loadConformance(dir)
}

// conformanceKey names a conformance build: the binaries' key, the node
// image components it reuses, the Debian tree and the image table.
func conformanceKey(goVersion, binKey string, deps map[string]nodeimage.Component) (string, error) {
	h := nodeimage.NewHasher("conformance/v1")
	h.Add("bin", binKey)
	h.Add("busybox", busyboxKey())
	for _, name := range []string{"etcd", "pause"} {
		dc := deps[name]
		files, err := dc.Sources()
		if err != nil {
			return "", err
		}
		h.Add("component:"+name, dc.Key(goVersion, files))
	}
	h.Add("toolbox", toolboxKey())
	table, err := json.Marshal(conformanceImages())
	if err != nil {
		return "", err
	}
	h.Add("images", string(table))
	h.Add("layers", conformanceLayersVersion)
	return h.Sum(), nil
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
func (b *builder) ensureE2EBinaries(ctx context.Context, c nodeimage.Component, files map[string][]byte, key string) (string, error) {
	dir := filepath.Join(b.CacheDir(), "conformance", "bin-"+key)
	bin := filepath.Join(dir, "bin")
	complete := exists(filepath.Join(bin, "e2e.test"))
	for _, n := range c.Binaries {
		complete = complete && exists(filepath.Join(bin, n))
	}
	if complete {
		b.Log().Debugf("conformance binaries: cached in %s", dir)
		return bin, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	tmp, err := nodeimage.Scratch(dir)
	if err != nil {
		return "", err
	}
	src := filepath.Join(tmp, "src")
	if err := nodeimage.WriteModule(src, files); err != nil {
		return "", err
	}
	out := filepath.Join(tmp, "bin")
	steps := []struct {
		title string
		cmd   nodeimage.Command
	}{
		{fmt.Sprintf("Building kubectl %s and the test images' programs (%s)", c.Version, strings.Join(c.Binaries[1:], ", ")),
			nodeimage.GoBuildCmd(b.goBin, b.CacheDir(), c, src, out)},
		{fmt.Sprintf("Building e2e.test %s (go test -c %s)", c.Version, e2ePackage),
			e2eTestCmd(b.goBin, b.CacheDir(), c, src, out)},
	}
	for _, s := range steps {
		end := b.Progress().Start(s.title)
		err := b.Run(ctx, s.cmd, b.Progress().Update)
		end(err)
		if err != nil {
			return "", err
		}
	}
	if err := nodeimage.Publish(tmp, dir); err != nil {
		return "", err
	}
	return bin, nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
