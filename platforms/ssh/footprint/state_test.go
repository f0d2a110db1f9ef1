package footprint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms"
)

// fakeSystemd is a host's record in a temporary directory and a
// systemctl on PATH that logs its commands and keeps which units are
// enabled as files.
type fakeSystemd struct {
	rec, enabled, log, bin string
}

// newFakeSystemd records units as kiln's, the enabled ones among them
// enabled, and the unit files /etc/systemd/system has now, so that none
// appeared since the record.
func newFakeSystemd(t *testing.T, units, enabled []string) *fakeSystemd {
	t.Helper()
	dir := t.TempDir()
	f := &fakeSystemd{rec: filepath.Join(dir, "rec"), enabled: filepath.Join(dir, "enabled"), log: filepath.Join(dir, "log"), bin: filepath.Join(dir, "bin")}
	for _, d := range []string{f.rec, f.enabled, f.bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files, err := exec.Command("/bin/sh", "-c", "find /etc/systemd/system -maxdepth 1 -type f 2>/dev/null | sort").Output()
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(f.rec, "recorded"), "")
	write(filepath.Join(f.rec, "units"), strings.Join(units, " ")+"\n")
	write(filepath.Join(f.rec, "unit-files"), string(files))
	for _, u := range enabled {
		write(filepath.Join(f.enabled, u), "")
	}
	systemctl := `#!/bin/sh
echo "$*" >>"$FAKE_LOG"
cmd=$1
shift
case $cmd in
is-enabled)
	if [ -e "$FAKE_ENABLED/$1" ]; then echo enabled; else echo disabled; exit 1; fi ;;
enable)
	for u in "$@"; do [ "$u" = --quiet ] || : >"$FAKE_ENABLED/$u"; done ;;
disable)
	for u in "$@"; do rm -f "$FAKE_ENABLED/$u"; done ;;
esac
`
	if err := os.WriteFile(filepath.Join(f.bin, "systemctl"), []byte(systemctl), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs script with the record at f.rec and the fake systemctl, and
// returns the systemctl commands it ran but the is-enabled questions.
func (f *fakeSystemd) run(t *testing.T, script string) []string {
	t.Helper()
	os.Remove(f.log)
	cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, RecordDir, f.rec))
	cmd.Env = append(os.Environ(), "PATH="+f.bin+":"+os.Getenv("PATH"), "FAKE_LOG="+f.log, "FAKE_ENABLED="+f.enabled)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(f.log)
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" && !strings.HasPrefix(l, "is-enabled ") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

func (f *fakeSystemd) read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.rec, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

func (f *fakeSystemd) enabledUnits(t *testing.T) string {
	t.Helper()
	es, err := os.ReadDir(f.enabled)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestStopAndStart runs stop.sh and start.sh against a fake systemd: stop
// names the enabled units of kiln's, disables them and stops the units
// before the pods and the runtime last; a second stop keeps the first
// list; start enables them again, starts them in one transaction and
// drops the list; a start on a running node starts the enabled units
// alone.
func TestStopAndStart(t *testing.T) {
	units := []string{"kubelet.service", "kiln-api-proxy.service", "containerd.service", "kiln-images.service"}
	f := newFakeSystemd(t, units, []string{"containerd.service", "kiln-api-proxy.service", "kubelet.service", "unrelated.service"})
	got := f.run(t, StopScript())
	want := []string{
		"disable --quiet containerd.service kiln-api-proxy.service kubelet.service",
		"stop kiln-api-proxy.service kiln-images.service kubelet.service",
		"stop kubepods.slice",
		"kill --signal=SIGKILL containerd.service",
		"stop containerd.service",
		"reset-failed containerd.service",
		"kill --signal=SIGKILL kubepods.slice",
		"stop kubepods.slice",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stop ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	list := "containerd.service\nkiln-api-proxy.service\nkubelet.service\n"
	if got := f.read(t, StoppedFile); got != list {
		t.Errorf("stop's list %q, want %q", got, list)
	}
	if got := f.enabledUnits(t); got != "unrelated.service" {
		t.Errorf("enabled after stop: %q; want the host's own unit alone", got)
	}

	// Stopped again (a stop cut short): nothing of kiln's is enabled now,
	// and the list stays the first one.
	f.run(t, StopScript())
	if got := f.read(t, StoppedFile); got != list {
		t.Errorf("a second stop's list %q, want the first %q", got, list)
	}

	got = f.run(t, StartScript())
	want = []string{
		"enable --quiet containerd.service kiln-api-proxy.service kubelet.service",
		"start --no-block containerd.service kiln-api-proxy.service kubelet.service",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("start ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(filepath.Join(f.rec, StoppedFile)); !os.IsNotExist(err) {
		t.Errorf("start left the list: %v", err)
	}
	if got := f.enabledUnits(t); got != "containerd.service kiln-api-proxy.service kubelet.service unrelated.service" {
		t.Errorf("enabled after start: %q", got)
	}

	// A running node: start enables nothing and starts what is enabled.
	if err := os.Remove(filepath.Join(f.enabled, "kubelet.service")); err != nil {
		t.Fatal(err)
	}
	got = f.run(t, StartScript())
	if want := "start --no-block containerd.service kiln-api-proxy.service"; strings.Join(got, "\n") != want {
		t.Errorf("start on a running node ran %q, want %q", got, want)
	}
}

// TestStopRefusesAHostWithoutRecord: a host kiln did not install (or
// reset) is neither stopped nor started.
func TestStopRefusesAHostWithoutRecord(t *testing.T) {
	f := newFakeSystemd(t, []string{"kubelet.service"}, []string{"kubelet.service"})
	if err := os.Remove(filepath.Join(f.rec, "recorded")); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{"stop": StopScript(), "start": StartScript()} {
		cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, RecordDir, f.rec))
		cmd.Env = append(os.Environ(), "PATH="+f.bin+":"+os.Getenv("PATH"), "FAKE_LOG="+f.log, "FAKE_ENABLED="+f.enabled)
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "kiln did not install this host") {
			t.Errorf("%s on a host without record: %v, %s", name, err, out)
		}
	}
	if _, err := os.Stat(f.log); !os.IsNotExist(err) {
		t.Errorf("systemctl ran on a host without record: %v", err)
	}
}

// shellHost runs scripts with /bin/sh on this machine, the record
// directory moved to rec.
type shellHost struct{ rec string }

func (h shellHost) RunScript(_ context.Context, _, script string) ([]byte, error) {
	return exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, RecordDir, h.rec)).Output()
}

func (shellHost) PushDir(context.Context, string, string, string, func(int64)) error { return nil }

// TestState reads a host's state from its record: absent without one,
// stopped with stop's list, else running.
func TestState(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	h := shellHost{rec: rec}
	check := func(want platforms.MachineState) {
		t.Helper()
		st, err := State(context.Background(), h, "host")
		if err != nil || st != want {
			t.Errorf("State = %q, %v; want %q", st, err, want)
		}
		if rec, err := Recorded(context.Background(), h, "host"); err != nil || rec != (want != platforms.MachineAbsent) {
			t.Errorf("Recorded = %v, %v in state %s", rec, err, want)
		}
	}
	check(platforms.MachineAbsent)
	if err := os.MkdirAll(rec, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rec, "recorded"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check(platforms.MachineRunning)
	if err := os.WriteFile(filepath.Join(rec, StoppedFile), []byte("kubelet.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check(platforms.MachineStopped)
}
