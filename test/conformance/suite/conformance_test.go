package suite

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

func TestE2EComponentSources(t *testing.T) {
	c := e2eComponent(release.Default())
	files, err := c.Sources()
	if err != nil {
		t.Fatal(err)
	}
	mod, sum := string(files["go.mod"]), string(files["go.sum"])
	for _, want := range []string{
		"module kiln.local/conformance/e2e", "require k8s.io/kubernetes v1.36.3",
		"k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.36.3", "k8s.io/api => k8s.io/api v0.36.3",
	} {
		if !strings.Contains(mod, want) {
			t.Errorf("go.mod lacks %q", want)
		}
	}
	if strings.Contains(mod, "{{") {
		t.Errorf("go.mod not fully rendered:\n%s", mod)
	}
	for _, want := range []string{"k8s.io/kubernetes v1.36.3 h1:", "k8s.io/sample-apiserver v0.36.3 h1:", "github.com/onsi/ginkgo/v2 "} {
		if !strings.Contains(sum, want) {
			t.Errorf("go.sum lacks %q", want)
		}
	}
	// The node image's kubernetes component must not see the conformance
	// module: its sources, and so the node image key, stay as they were.
	if _, k8sFiles := nodeComponent(t, "kubernetes"); strings.Contains(string(k8sFiles["go.mod"]), "conformance") {
		t.Error("the kubernetes component renders the conformance module")
	}
}

// TestE2EModuleSelectsTheNodeImageVersions checks what lets e2e.test and
// kubectl reuse the packages the node image's Kubernetes build compiled:
// the conformance module replaces the same staging modules with the same
// versions as the kubernetes component, and both select the same version
// of every module they share, so that -trimpath names (and the Go build
// cache keys) their packages alike. The second half resolves both modules
// with `go list` from the kiln cache's module cache, so it runs only where a
// node image was built (it needs no network).
func TestE2EModuleSelectsTheNodeImageVersions(t *testing.T) {
	rel := release.Default()
	e2e := e2eComponent(rel)
	e2eFiles, err := e2e.Sources()
	if err != nil {
		t.Fatal(err)
	}
	k8s, k8sFiles := nodeComponent(t, "kubernetes")
	if got, want := goModBlock(t, string(e2eFiles["go.mod"]), "replace"), goModBlock(t, string(k8sFiles["go.mod"]), "replace"); !reflect.DeepEqual(got, want) {
		t.Errorf("the conformance module replaces\n%s\nthe kubernetes component\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	cache, err := platforms.CacheDir(os.Getenv)
	if err != nil {
		t.Skip(err)
	}
	if !exists(filepath.Join(cache, "go", "mod", "cache", "download", "k8s.io", "kubernetes", "@v", rel.Kubernetes+".zip")) {
		t.Skipf("no k8s.io/kubernetes %s in %s's module cache (a node image build fills it)", rel.Kubernetes, cache)
	}
	tk, err := nodeimage.NewToolkit(nodeimage.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	goBin, _, err := tk.Go()
	if err != nil {
		t.Skip(err)
	}
	k8sMods := selectedModules(t, goBin, cache, k8sFiles, k8s.Packages)
	// e2e.test with its test dependencies, then the other programs.
	e2eMods := selectedModules(t, goBin, cache, e2eFiles, []string{"-test", e2ePackage})
	maps.Copy(e2eMods, selectedModules(t, goBin, cache, e2eFiles, e2e.Packages))
	shared := 0
	for m, v := range e2eMods {
		if kv, ok := k8sMods[m]; ok {
			shared++
			if kv != v {
				t.Errorf("%s: %s in the conformance module, %s in the kubernetes component's: their packages compile twice", m, v, kv)
			}
		}
	}
	if shared < 100 {
		t.Errorf("the modules share only %d modules", shared)
	}
}

// selectedModules resolves the module of files offline from the kiln
// cache's module cache and returns the version it selects of each module
// that provides one of the packages' dependencies.
func selectedModules(t *testing.T, goBin, cache string, files map[string][]byte, args []string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := nodeimage.WriteModule(dir, files); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), nodeimage.GoEnv(cache, false)...)
	cmd.Env = append(cmd.Env, "GOPROXY=off", "GOCACHE="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		if bytes.Contains(stderr, []byte("module lookup disabled by GOPROXY=off")) {
			// A node image built, the conformance suite never: its
			// modules (ginkgo, gomega) are not in the cache.
			t.Skipf("the kiln cache's module cache lacks a module of %v (conformance build fills it):\n%s", args, lastLine(stderr))
		}
		t.Fatalf("go list in %s: %v\n%s", dir, err, stderr)
	}
	mods := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(l, " "); ok && version != "" {
			mods[path] = version
		}
	}
	return mods
}

// lastLine returns b's last non-empty line.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// goModBlock returns the lines of go.mod's `name ( ... )` block, trimmed,
// without comments and blank lines.
func goModBlock(t *testing.T, mod, name string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(mod, "\n"+name+" (\n")
	if !ok {
		t.Fatalf("go.mod has no %s block:\n%s", name, mod)
	}
	body, _, ok := strings.Cut(rest, "\n)")
	if !ok {
		t.Fatalf("go.mod's %s block is not closed", name)
	}
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			out = append(out, l)
		}
	}
	return out
}

func TestE2ETestCmd(t *testing.T) {
	c := e2eComponent(release.Default())
	cmd := e2eTestCmd("/usr/local/go/bin/go", "/cache", c, "/src", "/out")
	build := nodeimage.GoBuildCmd("/usr/local/go/bin/go", "/cache", c, "/src", "/out")
	if cmd.Path != build.Path || cmd.Dir != "/src" || !reflect.DeepEqual(cmd.Env, build.Env) {
		t.Errorf("go test -c runs as %s in %s with %v; go build as %s in %s with %v", cmd.Path, cmd.Dir, cmd.Env, build.Path, build.Dir, build.Env)
	}
	want := []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags", build.Args[4], "-o", "/out/e2e.test", "k8s.io/kubernetes/test/e2e"}
	if !reflect.DeepEqual(cmd.Args, want) {
		t.Errorf("argv\n got %q\nwant %q", cmd.Args, want)
	}
	if build.Args[3] != "-ldflags" || !strings.Contains(build.Args[4], "-X k8s.io/component-base/version.gitVersion=v1.36.3") {
		t.Errorf("go build argv %q lacks the Kubernetes version flags", build.Args)
	}
	for _, env := range []string{"GOCACHE=/cache/go/build", "GOMODCACHE=/cache/go/mod", "CGO_ENABLED=0"} {
		if !slices.Contains(cmd.Env, env) {
			t.Errorf("env lacks %s: the build would not share the node image's build cache", env)
		}
	}
	if got := toolboxCmd("http://deb.example/debian", "/x/rootfs"); got.Path != "debootstrap" ||
		!slices.Contains(got.Args, "--variant=minbase") || !strings.Contains(strings.Join(got.Args, " "), "nginx-light") ||
		got.Args[len(got.Args)-1] != "http://deb.example/debian" {
		t.Errorf("debootstrap argv = %q", got.Args)
	}
}

func TestConformanceKey(t *testing.T) {
	c := e2eComponent(release.Default())
	files, err := c.Sources()
	if err != nil {
		t.Fatal(err)
	}
	deps := map[string]nodeimage.Component{}
	for _, dc := range nodeimage.Components(release.Default()) {
		deps[dc.Name] = dc
	}
	k1 := e2eKey("go1.26.8", c, files)
	if k2 := e2eKey("go1.26.9", c, files); k1 == k2 {
		t.Error("a different Go toolchain did not change the binaries' key")
	}
	a, err := conformanceKey("go1.26.8", k1, deps)
	if err != nil {
		t.Fatal(err)
	}
	b, err := conformanceKey("go1.26.8", k1, deps)
	if err != nil {
		t.Fatal(err)
	}
	other, err := conformanceKey("go1.26.8", "another", deps)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a == other {
		t.Errorf("keys %s, %s (same inputs), %s (other binaries)", a, b, other)
	}
}

// TestConformanceImages pins the references: they must be exactly those of
// k8s.io/kubernetes/test/utils/image/manifest.go at v1.36.3, or the specs
// try to pull.
func TestConformanceImages(t *testing.T) {
	want := []string{
		"registry.k8s.io/e2e-test-images/agnhost:2.63.0",
		"registry.k8s.io/e2e-test-images/agnhost:2.55",
		"registry.k8s.io/e2e-test-images/busybox:1.37.0-1",
		"registry.k8s.io/e2e-test-images/nginx:1.15-4",
		"registry.k8s.io/e2e-test-images/nginx:1.27-0",
		"registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0",
		"registry.k8s.io/e2e-test-images/nautilus:1.8",
		"registry.k8s.io/e2e-test-images/kitten:1.8",
		"registry.k8s.io/e2e-test-images/nonroot:1.5",
		"registry.k8s.io/e2e-test-images/nonewprivs:1.4",
		"registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2",
		"registry.k8s.io/etcd:3.6.8-0",
		"registry.k8s.io/pause:3.10.2",
	}
	var got []string
	b := &builder{}
	src := conformanceSources{bins: map[string]string{}}
	for _, img := range conformanceImages() {
		got = append(got, img.Ref)
		if len(img.Layers) == 0 || (len(img.Entrypoint) == 0 && len(img.Cmd) == 0) {
			t.Errorf("%s: no layers or nothing to run", img.Ref)
		}
		for _, l := range img.Layers {
			if l == "debian" || l == "busybox" || l == "agnhost" {
				continue // read the Debian tree
			}
			if _, err := b.conformanceLayer(t.Context(), l, src); err != nil {
				t.Errorf("%s: layer %s: %v", img.Ref, l, err)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("images\n got %q\nwant %q", got, want)
	}
	if _, err := b.conformanceLayer(t.Context(), "nope", src); err == nil {
		t.Error("an unknown layer name gave no error")
	}
}

func TestTreeEntries(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/share/doc/x", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"usr/bin/nnp", "usr/share/doc/x/README"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "usr/bin/nnp"), 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	entries, err := treeEntries(root, []string{"dev", "usr/share/doc"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]nodeimage.LayerEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	if e := got["usr/bin/nnp"]; e.Mode != 0o4755 || e.Source != filepath.Join(root, "usr/bin/nnp") {
		t.Errorf("nnp = %+v", e)
	}
	if e := got["tmp"]; !e.Dir || e.Mode != 0o1777 {
		t.Errorf("tmp = %+v", e)
	}
	if e := got["bin"]; e.Link != "usr/bin" {
		t.Errorf("bin = %+v", e)
	}
	if e, ok := got["usr/share/doc"]; !ok || !e.Dir {
		t.Errorf("a skipped directory is not kept empty: %+v", e)
	}
	if _, ok := got["usr/share/doc/x/README"]; ok {
		t.Error("a file under a skipped directory was taken")
	}
}

func TestBusyboxApplets(t *testing.T) {
	got := busyboxApplets("[\n[[\nbusybox\nsh\n\nwget\nnslookup\n")
	if want := []string{"[", "[[", "sh", "wget", "nslookup"}; !reflect.DeepEqual(got, want) {
		t.Errorf("applets %q, want %q", got, want)
	}
}

// nodeComponent returns the default release's node image component named
// name and its rendered module.
func nodeComponent(t *testing.T, name string) (nodeimage.Component, map[string][]byte) {
	t.Helper()
	for _, c := range nodeimage.Components(release.Default()) {
		if c.Name != name {
			continue
		}
		files, err := c.Sources()
		if err != nil {
			t.Fatal(err)
		}
		return c, files
	}
	t.Fatalf("no node image component %s", name)
	return nodeimage.Component{}, nil
}
