package mcagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	igntypes "github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// writeLikeIgnition writes cfg's files and units below root, as Ignition
// does at a machine's first boot.
func writeLikeIgnition(t *testing.T, root string, cfg igntypes.Config) {
	t.Helper()
	put := func(name string, data []byte, mode os.FileMode) {
		full := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range cfg.Storage.Files {
		data, _, err := ignition.FileContents(cfg, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		put(f.Path, data, fileMode(f.Mode))
	}
	for _, u := range cfg.Systemd.Units {
		if u.Contents != nil {
			put("/etc/systemd/system/"+u.Name, []byte(*u.Contents), 0o644)
		}
		for _, d := range u.Dropins {
			put("/etc/systemd/system/"+u.Name+".d/"+d.Name, []byte(deref(d.Contents)), 0o644)
		}
	}
}

// TestFirstBootIsAsIfApplied boots a machine from a full config with its
// pool's rendered config merged in: its agent finds no drift and nothing
// to do, and taking the MachineConfig away later puts back the
// install-time file it replaced.
func TestFirstBootIsAsIfApplied(t *testing.T) {
	base := ignition.New()
	ignition.AddFile(&base, "/etc/motd", 0o644, []byte("install-time"))
	ignition.AddFile(&base, nodelayout.NodeEnvFile, 0o644, []byte("KILN_NODE_IP=10.0.0.2\n"))
	r := render(t, `
storage:
  files:
  - {path: /etc/motd, contents: {source: "data:,from%20the%20pool"}}
  - {path: /etc/kiln-test/new.conf, mode: 384, contents: {source: "data:,new"}}
systemd:
  units:
  - {name: hello.service, enabled: true, contents: "[Service]\nExecStart=/bin/true\n"}`, "maxPods: 77")
	out, err := machineconfig.FirstBoot(base, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := ignition.Validate(mustMarshal(t, out)); err != nil {
		t.Fatalf("the merged config does not validate: %v", err)
	}
	p := machineconfig.NodePaths()
	p.Root = t.TempDir()
	writeLikeIgnition(t, p.Root, out)
	if got := read(t, p, "/etc/motd"); got != "from the pool" {
		t.Errorf("/etc/motd at first boot %q", got)
	}
	if got := read(t, p, p.KubeletDropin); !strings.Contains(got, `"maxPods": 77`) {
		t.Errorf("kubelet drop-in at first boot %q", got)
	}

	run := &recorder{}
	a := newApplier(p, run)
	s, err := a.load()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != r.Name {
		t.Errorf("the agent starts at %q, want %s", s.Name, r.Name)
	}
	if d := a.drift(s); len(d) != 0 {
		t.Errorf("drift at first boot: %v", d)
	}
	if err := a.apply(context.Background(), s, render(t, "", "")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p, "/etc/motd"); got != "install-time" {
		t.Errorf("/etc/motd after the MachineConfig went: %q, want the install-time one back", got)
	}
	for _, gone := range []string{"/etc/kiln-test/new.conf", "/etc/systemd/system/hello.service", p.KubeletDropin} {
		if _, err := os.Stat(filepath.Join(p.Root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s left (%v)", gone, err)
		}
	}
	if got := read(t, p, nodelayout.NodeEnvFile); got != "KILN_NODE_IP=10.0.0.2\n" {
		t.Errorf("a file of the install-time config only changed: %q", got)
	}
}

func mustMarshal(t *testing.T, c igntypes.Config) []byte {
	t.Helper()
	data, err := ignition.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func fileMode(m *int) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
