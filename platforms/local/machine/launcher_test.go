package machine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDirectStartArgv(t *testing.T) {
	got := directStartArgv(
		[]string{"/sys/fs/cgroup/memory/kiln/m0/cgroup.procs", "/sys/fs/cgroup/cpu/kiln/m0/cgroup.procs"},
		[]string{"systemd-nspawn", "--boot"})
	want := []string{"/bin/sh", "-c", startScript, "kiln-machine-start",
		"/sys/fs/cgroup/memory/kiln/m0/cgroup.procs", "/sys/fs/cgroup/cpu/kiln/m0/cgroup.procs", "--",
		"systemd-nspawn", "--boot"}
	if !slices.Equal(got, want) {
		t.Errorf("directStartArgv =\n%q\nwant\n%q", got, want)
	}
}

// TestStartScript runs the start script with plain files standing in for
// cgroup.procs: each gets the shell's pid, which the command then keeps,
// and the cgroup2-only switch is dropped from the environment.
func TestStartScript(t *testing.T) {
	dir := t.TempDir()
	procs := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	argv := directStartArgv(procs, []string{"/bin/sh", "-c", `echo "$$ ${SYSTEMD_NSPAWN_UNIFIED_HIERARCHY:-unset} $1"`, "x", "arg one"})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.SplitN(strings.TrimSpace(string(out)), " ", 3)
	if len(fields) != 3 || fields[1] != "unset" || fields[2] != "arg one" {
		t.Fatalf("command saw %q", out)
	}
	if fields[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("command ran as pid %s, started as %d: not exec'd", fields[0], cmd.Process.Pid)
	}
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if strings.TrimSpace(string(data)) != fields[0] {
			t.Errorf("%s = %q, want pid %s", p, data, fields[0])
		}
	}

	// A cgroup that cannot be joined stops the start.
	argv = directStartArgv([]string{filepath.Join(dir, "missing", "cgroup.procs")}, []string{"/bin/echo", "started"})
	out, err = exec.Command(argv[0], argv[1:]...).Output()
	if err == nil || strings.Contains(string(out), "started") {
		t.Errorf("start went on without its cgroup: %q, %v", out, err)
	}
}

func TestSystemdRunArgv(t *testing.T) {
	head := []string{"systemd-run", "--unit=kiln-m0.service", "--description=kiln machine m0", "--collect",
		"--property=Delegate=yes", "--property=KillMode=mixed", "--property=Type=simple",
		"--property=StandardOutput=append:/s/m0/console.log", "--property=StandardError=append:/s/m0/console.log"}
	nspawn := []string{"systemd-nspawn", "--boot"}
	tests := []struct {
		name string
		lim  limits
		want []string
	}{
		{"unlimited", limits{}, append(slices.Clone(head), "--", "systemd-nspawn", "--boot")},
		{"limits", limits{CPUs: 2, MemoryBytes: 4 << 30}, append(slices.Clone(head),
			"--property=MemoryMax=4294967296", "--property=CPUQuota=200%", "--", "systemd-nspawn", "--boot")},
		{"fractional cpu", limits{CPUs: 0.5}, append(slices.Clone(head),
			"--property=CPUQuota=50%", "--", "systemd-nspawn", "--boot")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := systemdRunArgv("m0", tt.lim, "/s/m0/console.log", nspawn); !slices.Equal(got, tt.want) {
				t.Errorf("systemdRunArgv =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestSystemdLauncher(t *testing.T) {
	run := &fakeRunner{outputs: map[string]string{
		"systemctl show --property=MainPID --value kiln-m0.service": "3141\n",
		"systemctl list-units --all --plain --no-legend kiln-*.service": "kiln-m0.service loaded active running kiln machine m0\n" +
			"kiln-demo-master-1.service loaded failed failed kiln machine demo-master-1\n" +
			"kiln-lb-demo.service loaded active running kiln lb /var/lib/kiln/lb/demo\n",
	}}
	l := newLauncher(CgroupLayout{SystemdPID1: true}, CgroupSystemd, run)
	if l.Mode() != CgroupSystemd {
		t.Fatalf("mode %s", l.Mode())
	}
	pid, err := l.Start(context.Background(), "m0", limits{MemoryBytes: 1 << 30}, []string{"systemd-nspawn"}, "/s/m0/console.log")
	if err != nil || pid != 3141 {
		t.Fatalf("Start = %d, %v", pid, err)
	}
	if err := l.Cleanup(context.Background(), "m0"); err != nil {
		t.Fatal(err)
	}
	names := l.Names(context.Background())
	want := []string{
		strings.Join(systemdRunArgv("m0", limits{MemoryBytes: 1 << 30}, "/s/m0/console.log", []string{"systemd-nspawn"}), " "),
		"systemctl show --property=MainPID --value kiln-m0.service",
		"systemctl stop kiln-m0.service",
		"systemctl reset-failed kiln-m0.service",
		"systemctl list-units --all --plain --no-legend kiln-*.service",
	}
	if got := joined(run.calls); !slices.Equal(got, want) {
		t.Errorf("commands =\n%q\nwant\n%q", got, want)
	}
	if !slices.Equal(names, []string{"m0", "demo-master-1"}) {
		t.Errorf("Names = %q", names)
	}
}

// TestDirectLauncher runs the direct launcher against a fake cgroup tree:
// cgroups are created in every hierarchy, cpuset is initialised from its
// parent, limits are written, and Cleanup removes the tree.
func TestDirectLauncher(t *testing.T) {
	root := t.TempDir()
	var layout CgroupLayout
	for _, c := range []string{"cpu", "cpuset", "memory", "systemd"} {
		h := Hierarchy{Path: filepath.Join(root, c), Controllers: []string{c}}
		if c == "systemd" {
			h.Controllers = []string{"name=systemd"}
		}
		os.MkdirAll(h.Path, 0o755)
		layout.Hierarchies = append(layout.Hierarchies, h)
	}
	os.WriteFile(filepath.Join(root, "cpuset", "cpuset.cpus"), []byte("0-1\n"), 0o644)
	// The kernel creates these files empty in a new cpuset cgroup; the fake
	// tree needs them present up front.
	for _, d := range []string{"kiln", "kiln/m0"} {
		os.MkdirAll(filepath.Join(root, "cpuset", d), 0o755)
		os.WriteFile(filepath.Join(root, "cpuset", d, "cpuset.cpus"), nil, 0o644)
	}
	run := &fakeRunner{}
	l := newLauncher(layout, CgroupV1, run)
	pid, err := l.Start(context.Background(), "m0", limits{CPUs: 1.5, MemoryBytes: 1 << 30}, []string{"systemd-nspawn"}, "/log")
	if err != nil || pid != 4242 {
		t.Fatalf("Start = %d, %v", pid, err)
	}
	wantFiles := map[string]string{
		"memory/kiln/m0/memory.limit_in_bytes": "1073741824",
		"cpu/kiln/m0/cpu.cfs_period_us":        "100000",
		"cpu/kiln/m0/cpu.cfs_quota_us":         "150000",
		"cpuset/kiln/cpuset.cpus":              "0-1",
		"cpuset/kiln/m0/cpuset.cpus":           "0-1",
	}
	for f, want := range wantFiles {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || strings.TrimSpace(string(data)) != want {
			t.Errorf("%s = %q, %v; want %q", f, data, err, want)
		}
	}
	wantArgv := directStartArgv([]string{
		filepath.Join(root, "cpu/kiln/m0/cgroup.procs"), filepath.Join(root, "cpuset/kiln/m0/cgroup.procs"),
		filepath.Join(root, "memory/kiln/m0/cgroup.procs"), filepath.Join(root, "systemd/kiln/m0/cgroup.procs"),
	}, []string{"systemd-nspawn"})
	if len(run.detached) != 1 || !slices.Equal(run.detached[0], wantArgv) {
		t.Errorf("detached %q\nwant %q", run.detached, wantArgv)
	}
	if names := l.Names(context.Background()); !slices.Equal(names, []string{"m0"}) {
		t.Errorf("Names = %q", names)
	}
}

func TestThaw(t *testing.T) {
	for _, tt := range []struct{ file, frozen, thawed string }{
		{"freezer.state", "FROZEN\n", "THAWED"},
		{"freezer.state", "FREEZING\n", "THAWED"},
		{"freezer.state", "THAWED\n", "THAWED\n"},
		{"cgroup.freeze", "1\n", "0"},
		{"cgroup.freeze", "0\n", "0\n"},
	} {
		dir := t.TempDir()
		f := filepath.Join(dir, tt.file)
		if err := os.WriteFile(f, []byte(tt.frozen), 0o644); err != nil {
			t.Fatal(err)
		}
		thaw(dir)
		if got, _ := os.ReadFile(f); string(got) != tt.thawed {
			t.Errorf("%s %q: after thaw %q, want %q", tt.file, tt.frozen, got, tt.thawed)
		}
	}
	empty := t.TempDir()
	thaw(empty)
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("thaw created %v in a cgroup without freezer files", ents)
	}
}

// TestCleanupFrozenMachine runs on the host's real cgroup v1 hierarchies:
// a machine's process frozen by the freezer (as runc leaves a container
// killed while it sets it up) ignores SIGKILL and keeps the machine's
// cgroups busy in every hierarchy. The freezer hierarchy is listed last, as
// on hosts where it is mounted after cpu and memory; Cleanup must thaw it
// before it removes the others.
func TestCleanupFrozenMachine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	host, err := DetectCgroups()
	if err != nil {
		t.Fatal(err)
	}
	var layout CgroupLayout
	var freezer Hierarchy
	for _, h := range host.Hierarchies {
		switch {
		case slices.Contains(h.Controllers, "freezer"):
			freezer = h
		case slices.Contains(h.Controllers, "cpu") || slices.Contains(h.Controllers, "memory"):
			layout.Hierarchies = append(layout.Hierarchies, h)
		}
	}
	if freezer.Path == "" || len(layout.Hierarchies) == 0 || freezer.Unified {
		t.Skip("no cgroup v1 freezer hierarchy on this host")
	}
	layout.Hierarchies = append(layout.Hierarchies, freezer)
	name := "kiln-test-frozen-" + strconv.Itoa(os.Getpid())
	l := newLauncher(layout, CgroupV1, ExecRunner{})
	pid, err := l.Start(context.Background(), name, limits{}, []string{"sleep", "600"}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = l.Cleanup(context.Background(), name)
	})
	// A container's cgroup below the machine's, frozen with its process.
	frozen := filepath.Join(freezer.Path, cgroupParent, name, "pod")
	if err := os.Mkdir(frozen, 0o755); err != nil {
		t.Fatal(err)
	}
	// The start script moves itself into the cgroups, then execs sleep.
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(cgroupPIDs(filepath.Join(freezer.Path, cgroupParent, name)), pid); {
		if time.Now().After(deadline) {
			t.Fatalf("process %d never joined its freezer cgroup", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(frozen, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(frozen, "freezer.state"), []byte("FROZEN"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Cleanup(ctx, name); err != nil {
		t.Fatalf("Cleanup of a machine with a frozen process: %v", err)
	}
	for _, d := range layout.machineCgroups(name) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after Cleanup: %v", d, err)
		}
	}
}

func TestDescribeProcs(t *testing.T) {
	proc := t.TempDir()
	for pid, stat := range map[string]string{
		"10": "10 (runc:[2:INIT]) D 1 10 10 0",
		"11": "11 (a (b) c) S 1",
		"12": "garbage",
	} {
		os.MkdirAll(filepath.Join(proc, pid), 0o755)
		os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(stat), 0o644)
	}
	got := describeProcs(proc, []int{10, 11, 12, 13, 14, 15}, 5)
	want := "10 (runc:[2:INIT]) D, 11 (a (b) c) S, 12, 13, 14, and 1 more"
	if got != want {
		t.Errorf("describeProcs = %q\nwant %q", got, want)
	}
}
