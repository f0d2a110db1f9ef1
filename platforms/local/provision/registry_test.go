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

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/nodeimage"
	"github.com/kiln-project/kiln/platforms/local/registry"
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

// The reason a registry did not start is the last line of its log, which
// may be long.
func TestLastLogLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.log")
	long := strings.Repeat("level=info msg=\"response completed\"\n", 500)
	if err := os.WriteFile(path, []byte(long+"registry: listen tcp 127.0.0.1:5001: bind: address already in use\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := lastLogLine(path); got != "registry: listen tcp 127.0.0.1:5001: bind: address already in use" {
		t.Errorf("lastLogLine = %q", got)
	}
	if got := lastLogLine(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Errorf("lastLogLine of a missing file = %q", got)
	}
}

// With the add-on off, nothing is built, written or pushed.
func TestRegistryOff(t *testing.T) {
	p, _ := registryProvisioner(t)
	off := false
	cfg := planConfig(1, 1)
	cfg.Platform.Local.RegistryPort = 5001
	cfg.Platform.Local.Addons = &types.LocalAddons{Registry: &off}
	c := &platforms.Cluster{InfraID: "demo-x7k2p", Config: cfg}
	if err := p.startRegistry(context.Background(), c); err != nil {
		t.Fatal(err)
	}
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
