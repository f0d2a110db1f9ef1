package provision

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/registry"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// registryProvisioner returns a provisioner with its load balancer files
// in a temporary directory and its log in the returned buffer.
func registryProvisioner(t *testing.T) (*Provisioner, *bytes.Buffer) {
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	return &Provisioner{LBDir: t.TempDir(), Env: platforms.Env{Log: log, Progress: platforms.NoProgress{}}}, &logs
}

func TestImageArchives(t *testing.T) {
	dir := t.TempDir()
	if _, err := imageArchives(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no images.txt: error %v, want fs.ErrNotExist", err)
	}
	list := "pause.tar kiln.local/pause:3.10\n\netcd.tar kiln.local/etcd:v3.5.35\n"
	if err := os.WriteFile(filepath.Join(dir, "images.txt"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := imageArchives(dir); err != nil || !slices.Equal(got, []string{"pause.tar", "etcd.tar"}) {
		t.Errorf("imageArchives = %q, %v", got, err)
	}
}

// setRegistry gives the network stage the registry's port and the binary
// EnsureRegistry returns; with the add-on off, no registry and no build.
func TestSetRegistry(t *testing.T) {
	p, _ := registryProvisioner(t)
	var builds []nodeimage.Options
	p.EnsureRegistry = func(_ context.Context, o nodeimage.Options) (string, error) {
		builds = append(builds, o)
		return "/cache/components/registry-1/bin/registry", nil
	}
	p.Env.CacheDir = "/cache"
	cfg := planConfig(1, 1)
	cfg.Platform.Local.RegistryPort = 5002
	c := &platforms.Cluster{InfraID: "demo-x7k2p", Config: cfg}
	var v tfdata.LocalVars
	if err := p.setRegistry(context.Background(), c, &v); err != nil {
		t.Fatal(err)
	}
	want := tfdata.Registry{Port: 5002, Binary: "/cache/components/registry-1/bin/registry"}
	if v.Registry == nil || *v.Registry != want || len(builds) != 1 || builds[0].CacheDir != "/cache" {
		t.Errorf("registry variables %+v after %d builds (%+v), want %+v from one build in /cache", v.Registry, len(builds), builds, want)
	}

	off := false
	cfg.Platform.Local.Addons = &local.Addons{Registry: &off}
	if err := p.setRegistry(context.Background(), c, &v); err != nil || v.Registry != nil || len(builds) != 1 {
		t.Errorf("add-on off: registry %+v, %v after %d builds; want none and no build", v.Registry, err, len(builds))
	}

	// A registry that cannot be built fails the step, naming why.
	cfg.Platform.Local.Addons = nil
	boom := errors.New("no Go toolchain")
	p.EnsureRegistry = func(context.Context, nodeimage.Options) (string, error) { return "", boom }
	if err := p.setRegistry(context.Background(), c, &v); !errors.Is(err, boom) {
		t.Errorf("setRegistry with a failing build = %v, want %v", err, boom)
	}
}

// With the add-on off, nothing is pushed or written.
func TestRegistryOff(t *testing.T) {
	p, _ := registryProvisioner(t)
	off := false
	cfg := planConfig(1, 1)
	cfg.Platform.Local.RegistryPort = 5001
	cfg.Platform.Local.Addons = &local.Addons{Registry: &off}
	c := &platforms.Cluster{InfraID: "demo-x7k2p", Config: cfg}
	if err := p.pushKilnImages(context.Background(), c, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.lbDir(c.InfraID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("files of a registry that is off: %v", err)
	}
}

// A node image given as a tarball has no archives on the host: nothing is
// pushed, and the log says why.
func TestPushKilnImagesWithoutArchives(t *testing.T) {
	p, logs := registryProvisioner(t)
	cfg := planConfig(1, 1)
	cfg.Platform.Local.RegistryPort = 5001
	c := &platforms.Cluster{InfraID: "demo-x7k2p", Config: cfg}
	if err := p.pushKilnImages(context.Background(), c, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "has no "+nodeimage.ImagesDir) {
		t.Errorf("log lacks the reason:\n%s", logs)
	}
}

// `kiln load image-archive` pushes nothing into a cluster without a
// registry, and only warns when the registry does not run.
func TestPushArchiveWithoutRunningRegistry(t *testing.T) {
	p, logs := registryProvisioner(t)
	if err := p.pushArchive(context.Background(), "demo-x7k2p", "/nonexistent/images.tar"); err != nil || logs.Len() != 0 {
		t.Errorf("no registry: %v, log %q", err, logs)
	}
	if err := registry.WriteConfig(p.lbDir("demo-x7k2p"), netip.MustParseAddrPort("10.66.0.1:5001")); err != nil {
		t.Fatal(err)
	}
	if err := p.pushArchive(context.Background(), "demo-x7k2p", "/nonexistent/images.tar"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "localhost:5001 does not run") {
		t.Errorf("log lacks the warning:\n%s", logs)
	}
}
