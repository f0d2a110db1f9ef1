package mcagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeProc writes a process into a fake /proc.
func fakeProc(t *testing.T, proc string, pid, ppid int, cmdline, cgroup string) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"cmdline": cmdline,
		"stat":    strconv.Itoa(pid) + " (runc:[2:INIT]) S " + strconv.Itoa(ppid) + " 1 1 0 -1",
		"cgroup":  cgroup,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReapOrphanInits(t *testing.T) {
	// A real process stands for the orphan, so that the kill is real.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	t.Cleanup(func() { sleeper.Process.Kill() })
	orphan := sleeper.Process.Pid

	fsys := &OrphanFS{Proc: t.TempDir(), Cgroup: t.TempDir()}
	const pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-a.scope"
	state := filepath.Join(fsys.Cgroup, "freezer", pod, "freezer.state")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte("FROZEN"), 0o644); err != nil {
		t.Fatal(err)
	}
	groups := "12:freezer:" + pod + "\n1:name=systemd:" + pod + "\n0::" + pod + "\n"
	fakeProc(t, fsys.Proc, orphan, 1, "runc\x00init\x00", groups)
	// Left alone: an init its shim still watches, an orphan outside the
	// pods, a process that is no runc init.
	fakeProc(t, fsys.Proc, 999990, 4242, "runc\x00init\x00", groups)
	fakeProc(t, fsys.Proc, 999991, 1, "/usr/bin/runc\x00init\x00", "12:freezer:/system.slice/other.scope\n")
	fakeProc(t, fsys.Proc, 999992, 1, "sleep\x00init\x00", groups)

	pids, err := reapOrphanInits(fsys)
	if err != nil || len(pids) != 1 || pids[0] != orphan {
		t.Fatalf("reaped %v (%v), want [%d]", pids, err, orphan)
	}
	if data, _ := os.ReadFile(state); string(data) != "THAWED" {
		t.Errorf("freezer.state is %q", data)
	}
	if err := <-done; err == nil {
		t.Error("the orphan was not killed")
	}
	// cgroup.freeze of the unified hierarchy was not created where it was
	// not.
	if _, err := os.Stat(filepath.Join(fsys.Cgroup, pod, "cgroup.freeze")); err == nil {
		t.Error("a control file was created")
	}
}
