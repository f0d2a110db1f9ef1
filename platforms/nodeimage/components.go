package nodeimage

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/template"

	"github.com/kiln-project/kiln/assets/release"
	datacomponents "github.com/kiln-project/kiln/data/components"
)

// Component is one wrapper module (from data/components unless FS says
// otherwise) and what kiln builds from it.
type Component struct {
	// Name is the module's directory in FS.
	Name string
	// Version and StagingVersion fill the go.mod.in template.
	Version        string
	StagingVersion string
	// Packages are the `go build` arguments, relative to the module.
	Packages []string
	// Binaries are the files the build leaves in bin/, after Renames.
	Binaries []string
	// Renames names a binary go build leaves (named after its package's
	// directory) as kiln ships it: built name -> shipped name.
	Renames map[string]string
	// LDFlags are -X flags that set version strings.
	LDFlags []string
	// Tags are the build tags (go build -tags).
	Tags []string
	// Cgo builds with cgo and links a static PIE, as runc's `make static`
	// builds runc's release binaries: the binary needs no shared library
	// of the image. It needs a C compiler and the static archives of the
	// C libraries it links on the build host (see cgoPrecondition).
	Cgo bool
	// CLibs are the C libraries a Cgo component links.
	CLibs []cLib
	// FS holds the module's directory (Name); nil means data/components.
	FS fs.FS
}

// Built returns the names go build gives c's Binaries: each before its
// rename (Renames).
func (c Component) Built() []string {
	from := map[string]string{}
	for b, shipped := range c.Renames {
		from[shipped] = b
	}
	out := make([]string, len(c.Binaries))
	for i, n := range c.Binaries {
		out[i] = n
		if b, ok := from[n]; ok {
			out[i] = b
		}
	}
	return out
}

// kubernetesVersionVars are the packages whose version variables the
// Kubernetes build sets (hack/lib/version.sh sets the same).
var kubernetesVersionVars = [...]string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"}

// buildDate is the build date the Kubernetes binaries report: fixed, so
// builds are reproducible (as SOURCE_DATE_EPOCH=0 would make it).
const buildDate = "1970-01-01T00:00:00Z"

// metricsServerLD sets the version metrics-server reports, as its Makefile
// does.
var metricsServerLD = []string{
	"-X k8s.io/client-go/pkg/version.gitVersion=" + release.MetricsServerVersion,
	"-X k8s.io/client-go/pkg/version.gitTreeState=clean",
	"-X k8s.io/client-go/pkg/version.buildDate=" + buildDate,
}

// kubeRouterLDFlags set the version kube-router reports, as its Makefile
// does (with the tag where the Makefile has the commit).
var kubeRouterLDFlags = []string{
	"-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=" + release.KubeRouterVersion,
	"-X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=" + buildDate,
}

// containerdLDFlags set the version containerd, its shim and ctr report.
// The CRI reports it as the node's container runtime version: without the
// tag's "v", nodes show containerd://2.4.2.
var containerdLDFlags = []string{
	"-X github.com/containerd/containerd/v2/version.Version=" + strings.TrimPrefix(release.ContainerdVersion, "v"),
}

// KubernetesLDFlags returns the -X flags that set the version strings of
// everything built from k8s.io/kubernetes at version v.
func KubernetesLDFlags(v string) []string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var ld []string
	for _, p := range kubernetesVersionVars {
		ld = append(ld,
			"-X "+p+".gitVersion="+v,
			"-X "+p+".gitMajor="+major,
			"-X "+p+".gitMinor="+minor,
			"-X "+p+".gitTreeState=clean",
			"-X "+p+".buildDate="+buildDate,
		)
	}
	return ld
}

// Components returns every module kiln builds for the node image of rel.
func Components(rel release.Release) []Component {
	v := rel.Kubernetes
	k8sLD := KubernetesLDFlags(v)
	k8sBins := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "kubectl"}
	var k8sPkgs []string
	for _, b := range k8sBins {
		k8sPkgs = append(k8sPkgs, "k8s.io/kubernetes/cmd/"+b)
	}
	return []Component{
		{
			Name: "kubernetes", Version: v, StagingVersion: rel.KubernetesStaging,
			Packages: k8sPkgs, Binaries: k8sBins, LDFlags: k8sLD,
		},
		{
			Name: "etcd", Version: rel.Etcd,
			Packages: []string{".", "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3"}, Binaries: []string{"etcd", "etcdctl", "etcdutl"},
			LDFlags: []string{"-X go.etcd.io/etcd/api/v3/version.GitSHA=" + rel.Etcd},
		},
		{
			Name: "coredns", Version: rel.CoreDNS,
			Packages: []string{"."}, Binaries: []string{"coredns"},
			LDFlags: []string{"-X github.com/coredns/coredns/coremain.GitCommit=" + rel.CoreDNS},
		},
		{
			Name: "pause", Version: release.PauseVersion,
			Packages: []string{"."}, Binaries: []string{"pause"},
			LDFlags: []string{"-X main.version=" + release.PauseVersion},
		},
		{
			Name: "local-path-provisioner", Version: release.LocalPathProvisionerVersion, StagingVersion: rel.KubernetesStaging,
			Packages: []string{"github.com/rancher/local-path-provisioner", "./local-path-helper"},
			Binaries: []string{"local-path-provisioner", "local-path-helper"},
			LDFlags:  []string{"-X main.VERSION=" + release.LocalPathProvisionerVersion},
		},
		{
			Name: "metrics-server", Version: release.MetricsServerVersion,
			Packages: []string{"sigs.k8s.io/metrics-server/cmd/metrics-server"}, Binaries: []string{"metrics-server"},
			LDFlags: metricsServerLD,
		},
		{
			Name: "kube-router", Version: release.KubeRouterVersion,
			Packages: []string{"github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"}, Binaries: []string{"kube-router"},
			LDFlags: kubeRouterLDFlags,
		},
		{
			// MetalLB's source carries its version (internal/version).
			Name: "metallb", Version: release.MetalLBVersion,
			Packages: []string{"go.universe.tf/metallb/controller", "go.universe.tf/metallb/speaker"},
			Binaries: []string{"metallb", "metallb-speaker"},
			Renames:  map[string]string{"controller": "metallb", "speaker": "metallb-speaker"},
		},
		{
			Name: "containerd", Version: release.ContainerdVersion,
			Packages: []string{
				"github.com/containerd/containerd/v2/cmd/containerd",
				"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
				"github.com/containerd/containerd/v2/cmd/ctr",
			},
			Binaries: []string{"containerd", "containerd-shim-runc-v2", "ctr"},
			LDFlags:  containerdLDFlags,
			// As upstream's Makefile; without cgo the btrfs snapshotter
			// (cgo only) is left out, as its static builds do.
			Tags: []string{"urfave_cli_no_docs"},
		},
		{
			// runc's version comes from its embedded VERSION file. Its
			// Makefile's default tags less libpathrs (a Rust library no
			// distribution packages; runc then uses its pure-Go
			// pathrs-lite), plus the static build's netgo and osusergo.
			Name: "runc", Version: release.RuncVersion,
			Packages: []string{"github.com/opencontainers/runc"}, Binaries: []string{"runc"},
			LDFlags: []string{"-X main.gitCommit=" + release.RuncVersion},
			Tags:    []string{"seccomp", "urfave_cli_no_docs", "netgo", "osusergo"},
			Cgo:     true,
			CLibs:   []cLib{{PkgConfig: "libseccomp", Debian: "libseccomp-dev"}},
		},
	}
}

// Sources returns the module's files, rendered: name without ".in" ->
// content.
func (c Component) Sources() (map[string][]byte, error) {
	fsys := c.FS
	if fsys == nil {
		fsys = datacomponents.FS
	}
	out := map[string][]byte{}
	err := fs.WalkDir(fsys, c.Name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, c.Name+"/"), ".in")
		if path.Base(name) == "go.mod" {
			t, err := template.New(p).Option("missingkey=error").Parse(string(data))
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := t.Execute(&b, c); err != nil {
				return err
			}
			data = b.Bytes()
		}
		out[name] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wrapper module %s: %w", c.Name, err)
	}
	return out, nil
}

// GoEnv is the environment of every component build: static binaries
// (without cgo, unless the component needs it), kiln's own build and module
// caches, the local toolchain, go.sum-verified module resolution.
func GoEnv(cacheDir string, cgo bool) []string {
	cgoEnabled := "CGO_ENABLED=0"
	if cgo {
		cgoEnabled = "CGO_ENABLED=1"
	}
	return []string{
		cgoEnabled,
		"GOOS=linux",
		"GOARCH=" + runtime.GOARCH,
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOCACHE=" + filepath.Join(cacheDir, "go", "build"),
		"GOMODCACHE=" + filepath.Join(cacheDir, "go", "mod"),
	}
}

// GoBuildCmd returns the `go build` of c in the module directory src,
// writing binaries into out.
func GoBuildCmd(goBin, cacheDir string, c Component, src, out string) Command {
	ld := append([]string{"-s", "-w"}, c.LDFlags...)
	// -v names each package as it is compiled: the debug log and the
	// progress line show how far a long build has come.
	args := []string{"build", "-v", "-trimpath"}
	if c.Cgo {
		mode, static := staticCgo(runtime.GOARCH)
		args = append(args, mode...)
		ld = append(ld, static...)
	}
	if len(c.Tags) > 0 {
		args = append(args, "-tags", strings.Join(c.Tags, ","))
	}
	args = append(args, "-ldflags", strings.Join(ld, " "), "-o", out+string(filepath.Separator))
	return Command{
		Path: goBin,
		Args: append(args, c.Packages...),
		Env:  GoEnv(cacheDir, c.Cgo),
		Dir:  src,
	}
}

// staticCgo returns the build flags and -ldflags that link a cgo program
// statically for goarch, as runc's Makefile does: a static PIE where the C
// library supports one (amd64, arm64), else a plain static executable.
func staticCgo(goarch string) (buildFlags, ldFlags []string) {
	switch goarch {
	case "amd64", "arm64":
		return []string{"-buildmode=pie"}, []string{"-linkmode", "external", "-extldflags", "-static-pie"}
	}
	return nil, []string{"-extldflags", "-static"}
}

// Key returns the cache key of c: its rendered sources, the whole go build
// command line (flags, packages, environment) and the Go toolchain version.
func (c Component) Key(goVersion string, files map[string][]byte) string {
	h := NewHasher("component/v1")
	h.Add("name", c.Name)
	h.Add("go", goVersion)
	cmd := GoBuildCmd("go", "", c, "", "")
	h.Add("argv", strings.Join(cmd.Args, "\x00"))
	h.Add("env", strings.Join(cmd.Env, "\x00"))
	h.Add("binaries", strings.Join(c.Binaries, " "))
	for _, from := range slices.Sorted(maps.Keys(c.Renames)) {
		h.Add("rename", from+" "+c.Renames[from])
	}
	h.addFiles(files)
	return h.Sum()
}

// builtComponent is a component in the cache.
type builtComponent struct {
	Component
	Key string
	Bin string // directory holding Binaries
}

// complete reports whether every binary is in the cache.
func (bc builtComponent) complete() bool {
	for _, n := range bc.Binaries {
		if !exists(filepath.Join(bc.Bin, n)) {
			return false
		}
	}
	return true
}

// componentJob is a component on its way into the cache: its cache entry
// and, unless it is cached already, the scratch directory holding its
// rendered module.
type componentJob struct {
	builtComponent
	// Dir is the cache entry; Tmp is its scratch directory, "" when the
	// entry is complete.
	Dir, Tmp string
}

// src is the rendered module's directory in the scratch directory.
func (j componentJob) src() string { return filepath.Join(j.Tmp, "src") }

// componentEntry returns c's cache entry (complete or not) and the
// sources its key hashes.
func (b *builder) componentEntry(c Component) (componentJob, map[string][]byte, error) {
	files, err := c.Sources()
	if err != nil {
		return componentJob{}, nil, err
	}
	key := c.Key(b.goVersion, files)
	dir := filepath.Join(b.cache, "components", c.Name+"-"+key)
	return componentJob{builtComponent: builtComponent{Component: c, Key: key, Bin: filepath.Join(dir, "bin")}, Dir: dir}, files, nil
}

// stageComponent returns c's job: the cache entry when complete, else a
// fresh scratch directory with the module's sources written into it.
func (b *builder) stageComponent(c Component) (componentJob, error) {
	job, files, err := b.componentEntry(c)
	if err != nil {
		return job, err
	}
	dir := job.Dir
	if job.complete() {
		b.log.Debugf("component %s %s: cached in %s", c.Name, c.Version, dir)
		return job, nil
	}
	if c.Cgo {
		if err := cgoPrecondition(c, b.host); err != nil {
			return job, err
		}
	}
	if err := os.RemoveAll(dir); err != nil { // an incomplete entry, e.g. a binary deleted by hand
		return job, err
	}
	if job.Tmp, err = Scratch(dir); err != nil {
		return job, err
	}
	return job, WriteModule(job.src(), files)
}

// WriteModule writes a rendered module's files (Component.Sources) into dir.
func WriteModule(dir string, files map[string][]byte) error {
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ensureComponent builds c unless its cache entry exists.
func (b *builder) ensureComponent(ctx context.Context, c Component) (builtComponent, error) {
	job, err := b.stageComponent(c)
	if err != nil || job.Tmp == "" {
		return job.builtComponent, err
	}
	return job.builtComponent, b.buildComponent(ctx, job, nil)
}

// buildComponent runs the `go build` of a staged job, reported as one
// progress step, and publishes the binaries into the cache entry. When
// fetched is not nil, the build first waits for it to be closed (its
// modules downloaded); the step's time includes that wait.
func (b *builder) buildComponent(ctx context.Context, job componentJob, fetched <-chan struct{}) error {
	c := job.Component
	end := b.progress.Start(fmt.Sprintf("Building %s %s (%s)", c.Name, c.Version, strings.Join(c.Binaries, ", ")))
	err := ctx.Err()
	if fetched != nil {
		b.progress.Update("downloading modules")
		select {
		case <-fetched:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		err = b.goBuild(ctx, job)
	}
	end(err)
	return err
}

func (b *builder) goBuild(ctx context.Context, job componentJob) error {
	c := job.Component
	bin := filepath.Join(job.Tmp, "bin")
	run := b.runner(b.progress.Update)
	if err := run.run(ctx, GoBuildCmd(b.goBin, b.cache, c, job.src(), bin)); err != nil {
		return fmt.Errorf("building %s: %w", c.Name, err)
	}
	for from, to := range c.Renames {
		if err := os.Rename(filepath.Join(bin, from), filepath.Join(bin, to)); err != nil {
			return fmt.Errorf("building %s: %w", c.Name, err)
		}
	}
	for _, name := range c.Binaries {
		if !exists(filepath.Join(bin, name)) {
			return fmt.Errorf("building %s: go build did not produce %s", c.Name, name)
		}
	}
	return Publish(job.Tmp, job.Dir)
}
