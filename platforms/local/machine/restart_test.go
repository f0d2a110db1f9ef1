package machine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// nspawnCall returns the systemd-run command line that started nspawn.
func nspawnCall(t *testing.T, run *fakeRunner) []string {
	t.Helper()
	for _, c := range run.calls {
		if c[0] == "systemd-run" {
			return c
		}
	}
	t.Fatalf("no systemd-run call in %q", joined(run.calls))
	return nil
}

// bootableSpec returns the spec of a machine of m whose image and root
// (a plain directory: the overlay is not mounted, the runner is fake) are
// enough for Create and Start to run the start command.
func bootableSpec(t *testing.T, m *Manager) Spec {
	t.Helper()
	img := t.TempDir()
	os.MkdirAll(filepath.Join(img, "etc"), 0o755)
	os.WriteFile(filepath.Join(img, "etc/os-release"), []byte("ID=debian\n"), 0o644)
	spec := Spec{Name: "demo-master-0", Image: img, Bridge: "kiln0", Address: "10.66.0.11/24",
		Ignition: []byte(`{"ignition":{}}`), CPUs: 2, MemoryBytes: 1 << 30,
		Binds: []Bind{{Source: "/usr/bin/true", Target: "/usr/local/bin/kiln", ReadOnly: true}}}
	unit := filepath.Join(m.dir(spec.Name), "root/usr/lib/systemd/system/systemd-networkd.service")
	os.MkdirAll(filepath.Dir(unit), 0o755)
	os.WriteFile(unit, nil, 0o644)
	return spec
}

// TestStartBootsTheExistingDisk checks that Start runs the same start
// command line as Create (nspawn in a unit with the machine's limits),
// writes nothing into the machine's root, and keeps the disk when the
// start fails; and that it refuses a machine without a disk or with
// another spec.
func TestStartBootsTheExistingDisk(t *testing.T) {
	ctx := context.Background()
	// The fake unit never gets a process, so both starts fail after
	// running the start command.
	m, run := newTestManager(t)
	spec := bootableSpec(t, m)
	if err := m.Create(ctx, spec); err == nil || !strings.Contains(err.Error(), "no main process") {
		t.Fatalf("Create without a machine process: %v", err)
	}
	created := nspawnCall(t, run)

	if err := m.Start(ctx, spec); !errors.Is(err, ErrNoDisk) {
		t.Errorf("Start of a machine that was never created: %v, want ErrNoDisk", err)
	}

	// A stopped machine: its disk and a record of its last run.
	upper := filepath.Join(m.dir(spec.Name), "upper")
	if err := os.MkdirAll(filepath.Join(upper, "var/lib/etcd"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(upper, "var/lib/etcd/member"), []byte("data"), 0o600)
	if err := m.writeRecord(&record{Name: spec.Name, PID: 1 << 22, StartTime: 1, SpecHash: spec.hash(), Mode: CgroupSystemd}); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.State(ctx, spec.Name); st != StateStopped {
		t.Fatalf("State = %s, want stopped", st)
	}
	run.calls = nil
	err := m.Start(ctx, spec)
	if err == nil {
		t.Fatal("Start succeeded without a machine process")
	}
	started := nspawnCall(t, run)
	if !slices.Equal(started, created) {
		t.Errorf("Start ran\n%q\nCreate ran\n%q", started, created)
	}
	for _, want := range []string{"--property=MemoryMax=1073741824", "--property=CPUQuota=200%", "systemd-nspawn", "--boot",
		"--directory=" + filepath.Join(m.dir(spec.Name), "root"), "--bind-ro=/usr/bin/true:/usr/local/bin/kiln"} {
		if !slices.Contains(started, want) {
			t.Errorf("start command lacks %q: %q", want, started)
		}
	}
	if data, err := os.ReadFile(filepath.Join(upper, "var/lib/etcd/member")); err != nil || string(data) != "data" {
		t.Errorf("the disk did not survive a failed start: %q, %v", data, err)
	}
	// Nothing written into the root: no Ignition config, no hostname.
	for _, f := range []string{nodelayout.IgnitionConfigFile, "/etc/hostname", "/etc/machine-id"} {
		if _, err := os.Stat(filepath.Join(m.dir(spec.Name), "root", f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Start wrote %s into the root", f)
		}
	}
	for _, c := range joined(run.calls) {
		if strings.HasPrefix(c, "mount ") && !strings.Contains(c, "upperdir="+upper) {
			t.Errorf("unexpected mount %s", c)
		}
	}

	other := spec
	other.MemoryBytes = 2 << 30
	run.calls = nil
	if err := m.Start(ctx, other); err == nil || !strings.Contains(err.Error(), "different spec") {
		t.Errorf("Start with another spec: %v", err)
	}
	if len(run.calls) != 0 {
		t.Errorf("Start with another spec ran %q", joined(run.calls))
	}
}

func TestStopKeepsTheDisk(t *testing.T) {
	ctx := context.Background()
	m, run := newTestManager(t)
	if err := m.Stop(ctx, "m0"); err != nil {
		t.Errorf("Stop of an absent machine: %v", err)
	}
	upper := filepath.Join(m.dir("m0"), "upper")
	os.MkdirAll(upper, 0o755)
	if err := m.writeRecord(&record{Name: "m0", PID: 1 << 22, StartTime: 1}); err != nil {
		t.Fatal(err)
	}
	run.calls = nil
	if err := m.Stop(ctx, "m0"); err != nil {
		t.Fatal(err)
	}
	want := []string{"systemctl stop kiln-m0.service", "systemctl reset-failed kiln-m0.service"}
	if got := joined(run.calls); !slices.Equal(got, want) {
		t.Errorf("Stop ran %q, want %q", got, want)
	}
	if st, _ := m.State(ctx, "m0"); st != StateStopped {
		t.Errorf("State after Stop = %s, want stopped", st)
	}
	if _, err := os.Stat(upper); err != nil {
		t.Errorf("Stop removed the disk: %v", err)
	}
	if err := m.Stop(ctx, "../x"); !errors.As(err, new(*InvalidError)) {
		t.Errorf("Stop of a bad name: %v", err)
	}
}

// TestStopScript runs the stop script against fake systemctl and ctr: the
// running tasks get SIGTERM; the one still running after it gets SIGKILL.
func TestStopScript(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := func(name, body string) {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + calls + "\n" + body
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake("systemctl", "")
	fake("sleep", "")
	// etcd stops on SIGTERM; stuck ignores it; done was stopped already.
	fake("ctr", `case "$*" in
"namespaces ls -q") echo k8s.io ;;
"-n k8s.io tasks ls")
  echo "TASK PID STATUS"
  echo "done 1 STOPPED"
  if [ -f `+bin+`/etcd-killed ]; then echo "etcd 2 STOPPED"; else echo "etcd 2 RUNNING"; fi
  echo "stuck 3 RUNNING" ;;
"-n k8s.io tasks kill etcd") touch `+bin+`/etcd-killed ;;
esac
`)
	cmd := exec.Command("/bin/sh", "-c", stopScript)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, _ := os.ReadFile(calls)
	var kills []string
	for _, c := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(c, "tasks kill") || strings.HasPrefix(c, "systemctl") {
			kills = append(kills, c)
		}
	}
	want := []string{
		"systemctl stop kubelet.service",
		"ctr -n k8s.io tasks kill etcd",
		"ctr -n k8s.io tasks kill stuck",
		"ctr -n k8s.io tasks kill -s SIGKILL stuck",
	}
	if !slices.Equal(kills, want) {
		t.Errorf("calls =\n%q\nwant\n%q", kills, want)
	}
	if n := strings.Count(string(data), "sleep 0.5"); n != 20 {
		t.Errorf("waited %d times for the stuck task, want 20", n)
	}
}

// TestInterruptedStop: a machine whose Stop was interrupted after it began
// (marked stopping, its process still alive: kubelet may be stopped) is
// stopped for State, and Start first finishes the stop, then boots it; a
// Stop run again finishes it too and clears the mark.
func TestInterruptedStop(t *testing.T) {
	ctx := context.Background()
	m, run := newTestManager(t)
	spec := bootableSpec(t, m)
	if err := os.MkdirAll(filepath.Join(m.dir(spec.Name), "upper"), 0o755); err != nil { // its disk
		t.Fatal(err)
	}
	// The machine's "nspawn process": a child of the test, with no machine
	// in it, so the stop signals it directly.
	sleeper := func() *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		p, ok := readProc(cmd.Process.Pid)
		if !ok {
			t.Fatal("no /proc entry of the sleeper")
		}
		if err := m.writeRecord(&record{Name: spec.Name, PID: cmd.Process.Pid, StartTime: p.StartTime, SpecHash: spec.hash(), Mode: CgroupSystemd}); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	exited := func(cmd *exec.Cmd) bool {
		p, ok := readProc(cmd.Process.Pid)
		return !ok || p.State == 'Z'
	}

	cmd := sleeper()
	if st, _ := m.State(ctx, spec.Name); st != StateRunning {
		t.Fatalf("State = %s, want running", st)
	}
	if err := os.WriteFile(m.stoppingPath(spec.Name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.State(ctx, spec.Name); st != StateStopped {
		t.Errorf("State of a machine whose stop was interrupted = %s, want stopped", st)
	}
	run.calls = nil
	if err := m.Start(ctx, spec); err == nil || !strings.Contains(err.Error(), "no main process") {
		t.Fatalf("Start: %v; want it to finish the stop, then fail to boot on the fake runner", err)
	}
	if !exited(cmd) {
		t.Error("Start booted the machine again without finishing its interrupted stop")
	}
	nspawnCall(t, run)
	if m.stopping(spec.Name) {
		t.Error("the stopping mark is left after Start")
	}

	// Stop run again after an interrupted one: the machine stops and the
	// mark goes; a plain Stop leaves no mark.
	cmd = sleeper()
	if err := os.WriteFile(m.stoppingPath(spec.Name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if !exited(cmd) || m.stopping(spec.Name) {
		t.Errorf("Stop after an interrupted one: process exited %v, mark left %v", exited(cmd), m.stopping(spec.Name))
	}
	cmd = sleeper()
	if err := m.Stop(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if !exited(cmd) || m.stopping(spec.Name) {
		t.Errorf("Stop: process exited %v, mark left %v", exited(cmd), m.stopping(spec.Name))
	}
}
