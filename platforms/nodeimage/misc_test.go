package nodeimage

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

func TestBakedFiles(t *testing.T) {
	files, err := bakedFiles()
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]bakedFile{}
	for _, f := range files {
		if strings.Contains(string(f.Data), "{{") {
			t.Errorf("%s is not fully rendered", f.Path)
		}
		byPath[f.Path] = f
	}
	tests := []struct {
		path string
		mode os.FileMode
		want []string
	}{
		// /etc/containerd/config.toml: TestContainerdConfig.
		{"/etc/systemd/system/containerd.service", 0o644, []string{
			"ExecStart=/usr/local/bin/containerd", "Type=notify", "Delegate=yes", "KillMode=process",
			"WantedBy=multi-user.target",
		}},
		{"/usr/local/libexec/kiln/import-images", 0o755, []string{
			"present=$(ctr -n k8s.io images ls -q)", `ctr -n k8s.io images import "$dir/$file"`,
		}},
		{"/usr/local/libexec/kiln/ignition-firstboot", 0o755, []string{
			"/usr/lib/dracut/modules.d/30ignition/ignition", "-platform file", "for stage in fetch files",
			"[ ! -e /etc/selinux/config ]", "trap 'rm -rf \"$stub\"' EXIT", "PATH=/usr/local/libexec/kiln/no-selinux:$PATH",
			"systemctl daemon-reload", "systemctl preset", "systemctl start --no-block", "touch /var/lib/kiln/ignition.done",
		}},
		// kubelet's drop-in directory is the one its unit names (--config-dir).
		{"/usr/local/libexec/kiln/cgroup-rw", 0o755, []string{"cgroup2fs", "mount -o remount,bind,rw",
			"dropins=" + nodelayout.KubeletConfigDir + "\n", "failCgroupV1: false"}},
		{"/usr/local/libexec/kiln/no-selinux/setfiles", 0o755, []string{"exit 0"}},
		{"/etc/systemd/system/kiln-ignition.service", 0o644, []string{
			"ConditionPathExists=!/var/lib/kiln/ignition.done", "After=network-online.target",
			"Before=containerd.service kiln-images.service kubelet.service",
		}},
		{"/etc/systemd/system/kiln-images.service", 0o644, []string{"Requires=containerd.service", "Before=kubelet.service"}},
		{"/etc/systemd/system/kiln-cgroup-rw.service", 0o644, []string{"Before=containerd.service kubelet.service"}},
	}
	// systemd's configuration is reloaded once at first boot: by preset
	// when the config enables units, explicitly only when it does not.
	firstboot := string(byPath["/usr/local/libexec/kiln/ignition-firstboot"].Data)
	if n := strings.Count(firstboot, "systemctl daemon-reload"); n != 1 ||
		!strings.Contains(firstboot, "if [ -z \"$units\" ]; then\n\tsystemctl daemon-reload\nelse") {
		t.Errorf("ignition-firstboot reloads systemd outside the no-units branch (%d reloads in its text)", n)
	}
	for _, tt := range tests {
		f, ok := byPath[tt.path]
		if !ok {
			t.Errorf("%s is not baked", tt.path)
			continue
		}
		if f.Mode != tt.mode {
			t.Errorf("%s mode %o, want %o", tt.path, f.Mode, tt.mode)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(f.Data), w) {
				t.Errorf("%s lacks %q", tt.path, w)
			}
		}
	}
}

// TestContainerdConfig compares the rendered containerd configuration with
// testdata/containerd-config.toml (go test -update rewrites it). The e2e
// test has containerd itself parse the file (config dump).
func TestContainerdConfig(t *testing.T) {
	files, err := bakedFiles()
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, f := range files {
		if f.Path == "/etc/containerd/config.toml" {
			got = f.Data
		}
	}
	if got == nil {
		t.Fatal("/etc/containerd/config.toml is not baked")
	}
	golden := filepath.Join("testdata", "containerd-config.toml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("config.toml differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	// What the golden file must say whatever its layout: containerd 2's
	// config version 3, the CRI's sandbox image and registry hosts, and
	// no containerd 1.x table (version 2's "io.containerd.grpc.v1.cri"
	// holding the CRI's settings).
	for _, w := range []string{
		"version = 3\n",
		"[plugins.'io.containerd.cri.v1.images'.pinned_images]\n",
		"sandbox = '" + release.Default().Image(release.Pause) + "'\n",
		"[plugins.'io.containerd.cri.v1.images'.registry]\n",
		"config_path = '/etc/containerd/certs.d'\n",
		"snapshotter = 'overlayfs'\n",
		"restrict_oom_score_adj = true\n",
		"stats_collect_period = '10s'\n",
		"SystemdCgroup = true\n",
		"bin_dirs = ['/usr/lib/cni']\n",
	} {
		if !strings.Contains(string(got), w) {
			t.Errorf("config.toml lacks %q", w)
		}
	}
	if strings.Contains(string(got), "io.containerd.grpc.v1.cri") || strings.Contains(string(got), "bin_dir =") {
		t.Errorf("config.toml has containerd 1.x settings:\n%s", got)
	}
}

func TestInstallBaked(t *testing.T) {
	root := t.TempDir()
	files := []bakedFile{{Path: "/usr/local/sbin/x", Data: []byte("#!/bin/sh\n"), Mode: 0o755}}
	for i := 0; i < 2; i++ { // installing over an existing file works
		if err := installBaked(root, files); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "usr/local/sbin/x"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("stat: %v, mode %v", err, fi.Mode())
	}
}

func TestPlanKey(t *testing.T) {
	b := &builder{cache: "/cache", goVersion: "go1.26.8"}
	p1, err := b.plan()
	if err != nil {
		t.Fatal(err)
	}
	p2, err := b.plan()
	if err != nil {
		t.Fatal(err)
	}
	if p1.key != p2.key || p1.dir != "/cache/images/node-"+p1.key {
		t.Errorf("plans %s (%s) and %s differ", p1.key, p1.dir, p2.key)
	}
	b.goVersion = "go1.26.9"
	p3, err := b.plan()
	if err != nil {
		t.Fatal(err)
	}
	if p3.key == p1.key {
		t.Error("a different Go toolchain did not change the image key")
	}
}

func TestImageKey(t *testing.T) {
	files, err := bakedFiles()
	if err != nil {
		t.Fatal(err)
	}
	base, err := imageKey(release.Default(), "go1.26.8", files)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(fs []bakedFile) []bakedFile) string {
		c := append([]bakedFile(nil), files...)
		key, err := imageKey(release.Default(), "go1.26.8", f(c))
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	tests := []struct {
		name string
		edit func([]bakedFile) []bakedFile
		same bool
	}{
		{"nothing", func(fs []bakedFile) []bakedFile { return fs }, true},
		{"content", func(fs []bakedFile) []bakedFile {
			fs[0].Data = append(append([]byte(nil), fs[0].Data...), '\n')
			return fs
		}, false},
		{"mode", func(fs []bakedFile) []bakedFile { fs[0].Mode = 0o600; return fs }, false},
		{"path", func(fs []bakedFile) []bakedFile { fs[0].Path += ".orig"; return fs }, false},
		{"file added", func(fs []bakedFile) []bakedFile {
			return append(fs, bakedFile{Path: "/etc/x", Mode: 0o644})
		}, false},
	}
	for _, tt := range tests {
		if got := edit(tt.edit); (got == base) != tt.same {
			t.Errorf("%s: key %s, base %s, want same=%v", tt.name, got, base, tt.same)
		}
	}
}

func TestTailLog(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	tl := &tailLog{log: log}
	for _, chunk := range []string{"one\ntw", "o\r\nthr", "ee"} {
		if _, err := tl.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	tl.flush()
	var got []string
	for _, e := range hook.AllEntries() {
		if e.Level != logrus.DebugLevel {
			t.Errorf("logged at %v", e.Level)
		}
		got = append(got, e.Message)
	}
	if want := []string{"one", "two", "three"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	for i := 0; i < 20; i++ {
		tl.Write([]byte("x\n"))
	}
	if n := strings.Count(tl.last(), "\n"); n != tailLines {
		t.Errorf("last() kept %d lines, want %d", n, tailLines)
	}
}
