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
)

// newTestManager returns a Manager on a temporary state root whose
// commands go to a fake runner, in systemd mode so that no host cgroup is
// touched.
func newTestManager(t *testing.T) (*Manager, *fakeRunner) {
	t.Helper()
	run := &fakeRunner{}
	return NewManager(Options{StateRoot: t.TempDir(), Runner: run, Mode: CgroupSystemd}), run
}

func TestCreateRejectsInvalidSpec(t *testing.T) {
	m, run := newTestManager(t)
	err := m.Create(context.Background(), Spec{Name: "Bad_Name", Image: "/nonexistent", Bridge: "kiln0", Address: "10.0.0.1"})
	if ie := (*InvalidError)(nil); !errors.As(err, &ie) {
		t.Errorf("err = %v, want an InvalidError", err)
	}
	if len(run.calls)+len(run.detached) != 0 {
		t.Errorf("ran commands for an invalid spec: %q", joined(run.calls))
	}
}

func TestAbsentMachine(t *testing.T) {
	m, run := newTestManager(t)
	ctx := context.Background()
	if st, err := m.State(ctx, "m0"); err != nil || st != StateAbsent {
		t.Errorf("State = %s, %v", st, err)
	}
	if names, err := m.List(ctx, ""); err != nil || len(names) != 0 {
		t.Errorf("List = %q, %v", names, err)
	}
	if _, err := m.Exec(ctx, "m0", "true"); err == nil || errors.As(err, new(*InvalidError)) {
		t.Errorf("Exec on an absent machine: %v", err)
	}
	run.calls = nil
	if err := m.Destroy(ctx, "m0"); err != nil {
		t.Errorf("Destroy of an absent machine: %v", err)
	}
	want := []string{"systemctl stop kiln-m0.service", "systemctl reset-failed kiln-m0.service"}
	if got := joined(run.calls); !slices.Equal(got, want) {
		t.Errorf("Destroy ran %q, want %q", got, want)
	}
	if _, err := os.Stat(m.dir("m0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir exists after Destroy")
	}
	if err := m.Destroy(ctx, "../etc"); !errors.As(err, new(*InvalidError)) {
		t.Errorf("Destroy of a bad name: %v", err)
	}
}

func TestStoppedMachineListedAndDestroyed(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := context.Background()
	for _, n := range []string{"demo-master-0", "demo-worker-0", "other-master-0"} {
		os.MkdirAll(filepath.Join(m.dir(n), "upper"), 0o755)
		// A record whose process is long gone.
		if err := m.writeRecord(&record{Name: n, PID: 1 << 22, StartTime: 1}); err != nil {
			t.Fatal(err)
		}
	}
	names, err := m.List(ctx, "demo-")
	if err != nil || !slices.Equal(names, []string{"demo-master-0", "demo-worker-0"}) {
		t.Errorf("List = %q, %v", names, err)
	}
	if st, _ := m.State(ctx, "demo-master-0"); st != StateStopped {
		t.Errorf("State = %s, want stopped", st)
	}
	if err := m.Destroy(ctx, "demo-master-0"); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.State(ctx, "demo-master-0"); st != StateAbsent {
		t.Errorf("State after Destroy = %s", st)
	}
}

func TestVethDeleteArgv(t *testing.T) {
	if got, want := linkDeleteArgv("vb-demo-x7kuDRG"), []string{"ip", "link", "delete", "dev", "vb-demo-x7kuDRG"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestQuiesceScript runs the quiesce script against fake systemctl and ctr
// commands: kubelet is stopped and every task of every namespace killed.
func TestQuiesceScript(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := func(name, body string) {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + calls + "\n" + body
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake("systemctl", "")
	fake("ctr", `case "$*" in
"namespaces ls -q") printf 'k8s.io\nmoby\n' ;;
"-n k8s.io tasks ls -q") printf 'etcd\napiserver\n' ;;
esac
`)
	cmd := exec.Command("/bin/sh", "-c", quiesceScript)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, _ := os.ReadFile(calls)
	want := []string{
		"systemctl stop kubelet.service",
		"ctr namespaces ls -q",
		"ctr -n k8s.io tasks ls -q",
		"ctr -n k8s.io tasks kill -s SIGKILL etcd",
		"ctr -n k8s.io tasks kill -s SIGKILL apiserver",
		"ctr -n moby tasks ls -q",
	}
	if got := strings.Split(strings.TrimSpace(string(data)), "\n"); !slices.Equal(got, want) {
		t.Errorf("calls =\n%q\nwant\n%q", got, want)
	}
	// Without ctr (a machine without containerd) it still succeeds.
	os.Remove(filepath.Join(bin, "ctr"))
	cmd = exec.Command("/bin/sh", "-c", quiesceScript)
	cmd.Env = []string{"PATH=" + bin}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("without ctr: %v: %s", err, out)
	}
}
