package mcagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// recorder records the command lines it is asked to run. With unitDir
// set, a disable of a unit whose file is already gone (systemctl would
// fail) is recorded with "(no unit file)".
type recorder struct {
	argv    []string
	unitDir string
}

func (r *recorder) Run(_ context.Context, argv ...string) ([]byte, error) {
	line := strings.Join(argv, " ")
	if r.unitDir != "" && len(argv) == 4 && argv[1] == "disable" {
		if _, err := os.Stat(filepath.Join(r.unitDir, argv[3])); err != nil {
			line += " (no unit file)"
		}
	}
	r.argv = append(r.argv, line)
	return nil, nil
}

func (r *recorder) take() string {
	s := strings.Join(r.argv, "\n")
	r.argv = nil
	return s
}

func testPaths(t *testing.T) machineconfig.Paths {
	root := t.TempDir()
	return machineconfig.Paths{Root: root, StateDir: "/var/lib/kiln/machine-config", UnitDir: "/etc/systemd/system",
		KubeletDropin: "/var/lib/kiln/machine-config/kubelet.conf", RunKubeletDropin: "/run/kiln/kubelet.conf.d/50-machine-config.conf"}
}

func render(t *testing.T, config, kubelet string) *machineconfig.Rendered {
	t.Helper()
	m := machineconfig.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "10-test", Labels: map[string]string{machineconfig.PoolLabel: "worker"}}}
	for _, f := range []struct {
		src string
		dst *[]byte
	}{{config, (*[]byte)(&m.Spec.Config)}, {kubelet, (*[]byte)(&m.Spec.KubeletConfig)}} {
		if f.src == "" {
			continue
		}
		data, err := yaml.YAMLToJSON([]byte(f.src))
		if err != nil {
			t.Fatal(err)
		}
		*f.dst = data
	}
	r, err := machineconfig.Render("worker", []machineconfig.MachineConfig{m})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func read(t *testing.T, p machineconfig.Paths, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.Root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestApplyWritesRestartsAndRestores(t *testing.T) {
	p := testPaths(t)
	// The node had its own /etc/motd, which the config replaces.
	if err := os.MkdirAll(filepath.Join(p.Root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Root, "etc/motd"), []byte("owner's\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	run := &recorder{unitDir: filepath.Join(p.Root, p.UnitDir)}
	a := newApplier(p, run)
	s, err := a.load()
	if err != nil {
		t.Fatal(err)
	}

	one := render(t, `
storage:
  files:
  - {path: /etc/motd, mode: 420, contents: {source: "data:,kiln"}}
  - {path: /etc/kiln-test/a.conf, contents: {source: "data:,a%3D1"}}
systemd:
  units:
  - {name: hello.service, enabled: true, contents: "[Service]\nExecStart=/bin/true\n"}
  - name: containerd.service
    dropins: [{name: 50-test.conf, contents: "[Service]\nEnvironment=A=1\n"}]`, "maxPods: 42")
	if err := a.apply(context.Background(), s, one); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p, "/etc/motd"); got != "kiln" {
		t.Errorf("/etc/motd %q", got)
	}
	if got := read(t, p, "/etc/kiln-test/a.conf"); got != "a=1" {
		t.Errorf("a.conf %q", got)
	}
	if got := read(t, p, p.RunKubeletDropin); !strings.Contains(got, `"maxPods": 42`) {
		t.Errorf("kubelet drop-in %q", got)
	}
	want := strings.Join([]string{
		"systemctl daemon-reload",
		"systemctl try-restart containerd.service",
		"systemctl enable hello.service",
		"systemctl restart hello.service",
		"systemctl restart kubelet.service",
	}, "\n")
	if got := run.take(); got != want {
		t.Errorf("ran\n%s\nwant\n%s", got, want)
	}
	if s.Name != one.Name || s.Pending != "" {
		t.Errorf("state %s pending %q", s.Name, s.Pending)
	}
	if d := a.drift(s); len(d) != 0 {
		t.Errorf("drift right after apply: %v", d)
	}

	// The same config again changes and restarts nothing.
	s2, err := a.load()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.apply(context.Background(), s2, one); err != nil {
		t.Fatal(err)
	}
	if got := run.take(); got != "systemctl enable hello.service\nsystemctl start hello.service" {
		t.Errorf("re-applying ran\n%s", got)
	}

	// A hand edit is drift, named.
	if err := os.WriteFile(filepath.Join(p.Root, "etc/kiln-test/a.conf"), []byte("a=2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(p.Root, "etc/motd"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := a.drift(s2)
	if len(d) != 2 || d[0].Path != "/etc/kiln-test/a.conf" || d[0].What != "content" || d[1].Path != "/etc/motd" || !strings.HasPrefix(d[1].What, "mode") {
		t.Errorf("drift %+v", d)
	}
	if r := driftReason(d); !strings.Contains(r, "/etc/kiln-test/a.conf (content)") {
		t.Errorf("reason %q", r)
	}

	// A config without them puts the owner's /etc/motd back, removes
	// what kiln added, stops the unit and the kubelet drop-in.
	two := render(t, "storage: {files: [{path: /etc/other, contents: {source: 'data:,o'}}]}", "")
	if err := a.apply(context.Background(), s2, two); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p, "/etc/motd"); got != "owner's\n" {
		t.Errorf("/etc/motd %q, want the owner's back", got)
	}
	if info, err := os.Stat(filepath.Join(p.Root, "etc/motd")); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("/etc/motd mode %v, %v; want 0640", info.Mode(), err)
	}
	for _, gone := range []string{"/etc/kiln-test/a.conf", "/etc/systemd/system/hello.service", "/etc/systemd/system/containerd.service.d/50-test.conf", p.RunKubeletDropin, p.KubeletDropin} {
		if _, err := os.Stat(filepath.Join(p.Root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	want = strings.Join([]string{
		"systemctl disable --now hello.service", // while its file is there
		"systemctl daemon-reload",
		"systemctl try-restart containerd.service",
		"systemctl restart kubelet.service",
	}, "\n")
	if got := run.take(); got != want {
		t.Errorf("ran\n%s\nwant\n%s", got, want)
	}
}

func TestApplyRefusesALinkOnTheWay(t *testing.T) {
	p := testPaths(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(p.Root, "etc")); err != nil {
		t.Fatal(err)
	}
	a := newApplier(p, &recorder{})
	s, _ := a.load()
	err := a.apply(context.Background(), s, render(t, "storage: {files: [{path: /etc/x, contents: {source: 'data:,x'}}]}", ""))
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("apply through a link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
		t.Error("wrote through the link")
	}
}

func TestInterruptedApplyIsFinishedNotDrift(t *testing.T) {
	p := testPaths(t)
	run := &recorder{}
	a := newApplier(p, run)
	s, _ := a.load()
	one := render(t, "storage: {files: [{path: /etc/x, contents: {source: 'data:,one'}}]}", "")
	if err := a.apply(context.Background(), s, one); err != nil {
		t.Fatal(err)
	}
	// The agent dies after writing /etc/x for the next config, before its
	// state says so.
	two := render(t, "storage: {files: [{path: /etc/x, contents: {source: 'data:,two'}}]}", "")
	s.Pending = two.Name
	if err := a.save(s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Root, "etc/x"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := a.load()
	if err != nil {
		t.Fatal(err)
	}
	if d := a.drift(s); len(d) != 0 {
		t.Errorf("a pending apply reported as drift: %v", d)
	}
	if err := a.apply(context.Background(), s, two); err != nil {
		t.Fatal(err)
	}
	if d := a.drift(s); len(d) != 0 || s.Name != two.Name {
		t.Errorf("after finishing: %s, drift %v", s.Name, d)
	}
	// /etc/x was not the node's before kiln: removing it from the config
	// removes it.
	if err := a.apply(context.Background(), s, render(t, "", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.Root, "etc/x")); !os.IsNotExist(err) {
		t.Errorf("/etc/x left: %v", err)
	}
}

func TestRevertTakesBackDirectoriesAndFiles(t *testing.T) {
	p := testPaths(t)
	if err := os.MkdirAll(filepath.Join(p.Root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Root, "etc/motd"), []byte("owner's"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := &recorder{}
	a := newApplier(p, run)
	s, _ := a.load()
	cfg := render(t, `
storage:
  files:
  - {path: /etc/motd, contents: {source: "data:,kiln"}}
  - {path: /opt/site/conf.d/a.conf, contents: {source: "data:,a"}}
  directories:
  - {path: /srv/kiln-data}
systemd:
  units:
  - {name: hello.service, enabled: true, contents: "[Service]\nExecStart=/bin/true\n"}`, "")
	if err := a.apply(context.Background(), s, cfg); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.CreatedDirs, " "); got != "/etc/systemd /etc/systemd/system /opt /opt/site /opt/site/conf.d /srv /srv/kiln-data" {
		t.Errorf("created dirs %q", got)
	}
	run.take()
	if err := Revert(context.Background(), p, run); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p, "/etc/motd"); got != "owner's" {
		t.Errorf("/etc/motd %q after revert", got)
	}
	for _, gone := range []string{"/opt", "/srv", "/etc/systemd"} {
		if _, err := os.Stat(filepath.Join(p.Root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s left after revert (%v)", gone, err)
		}
	}
	if got := run.take(); got != "systemctl disable --now hello.service\nsystemctl daemon-reload" {
		t.Errorf("revert ran\n%s", got)
	}
	// Nothing applied: nothing to do, nothing run.
	if err := Revert(context.Background(), testPaths(t), run); err != nil || run.take() != "" {
		t.Errorf("revert of a machine without a config: %v", err)
	}
}

// TestApplySameContentRestartsNothing: a drop-in the node already has, as
// the config has it, is not a change.
func TestApplySameContentRestartsNothing(t *testing.T) {
	p := testPaths(t)
	dropin := filepath.Join(p.Root, "etc/systemd/system/containerd.service.d/50-test.conf")
	if err := os.MkdirAll(filepath.Dir(dropin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dropin, []byte("[Service]\nEnvironment=A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := &recorder{}
	a := newApplier(p, run)
	s, _ := a.load()
	cfg := render(t, `
systemd:
  units:
  - name: containerd.service
    dropins: [{name: 50-test.conf, contents: "[Service]\nEnvironment=A=1\n"}]`, "")
	if err := a.apply(context.Background(), s, cfg); err != nil {
		t.Fatal(err)
	}
	if got := run.take(); got != "" {
		t.Errorf("ran\n%s\nfor a drop-in already in place", got)
	}
	// Taken away, it is the node's own again: kept, and nothing restarts.
	if err := a.apply(context.Background(), s, render(t, "", "")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p, "/etc/systemd/system/containerd.service.d/50-test.conf"); got != "[Service]\nEnvironment=A=1\n" {
		t.Errorf("the node's own drop-in became %q", got)
	}
	if got := run.take(); got != "" {
		t.Errorf("ran\n%s\nwhen the config let go of a drop-in it had not changed", got)
	}
}
