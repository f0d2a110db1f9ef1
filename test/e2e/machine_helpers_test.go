package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// requireMachineHost skips the test unless machines can run here.
func requireMachineHost(t *testing.T, tools ...string) {
	t.Helper()
	if os.Getenv("KILN_E2E") != "1" {
		t.Skip("end-to-end test: set KILN_E2E=1 to run it (needs root, systemd-nspawn, network to a Debian mirror)")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test needs root to run systemd-nspawn machines")
	}
	for _, tool := range append([]string{"systemd-nspawn", "nsenter", "ip", "mount"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("end-to-end test needs %s on PATH", tool)
		}
	}
}

// testLogger sends log entries to the test log until the test has
// failed, and then to a file in artifactsDir (named once in the log): the
// teardown's commands would otherwise bury the failure under their lines,
// and a log's tail (CI's excerpt) would show them instead of it.
func testLogger(t *testing.T) logrus.FieldLogger {
	l := logrus.New()
	l.SetLevel(logrus.DebugLevel)
	l.Out = &testWriter{t: t}
	l.Formatter = &logrus.TextFormatter{DisableTimestamp: false, FullTimestamp: true}
	return l
}

// testWriter is testLogger's output.
type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	file *os.File // after the failure (open until the process ends); nil before, or when it cannot be made
	err  error    // why the file could not be made
}

func (w *testWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if !w.t.Failed() {
		w.t.Log(line)
		return len(p), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file == nil && w.err == nil {
		path := artifactPath(w.t, "log")
		if w.file, w.err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); w.err == nil {
			w.t.Logf("the rest of this test's log, after its failure: %s", path)
		}
	}
	if w.file == nil {
		w.t.Log(line)
		return len(p), nil
	}
	return w.file.Write(p)
}

// artifactPath returns a new file's path for what a failed test leaves
// to read: in $KILN_E2E_ARTIFACTS when set, else in the temporary
// directory, named for the test, what (a machine's name, "log") and the
// time.
func artifactPath(t *testing.T, what string) string {
	dir := os.Getenv("KILN_E2E_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, fmt.Sprintf("kiln-e2e-%s-%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), what, time.Now().UnixNano()))
}

// debootstrapRootfs returns a cache entry named for name and include: a
// bookworm tree of Debian's minbase with the packages include, made by
// debootstrap and then finish (when not nil), built once and cached across
// runs (KILN_E2E_CACHE, default /var/cache/kiln-e2e). Another package list
// is another entry.
func debootstrapRootfs(t *testing.T, name string, include []string, finish func(root string) error) string {
	t.Helper()
	cache := os.Getenv("KILN_E2E_CACHE")
	if cache == "" {
		cache = "/var/cache/kiln-e2e"
	}
	sum := sha256.Sum256([]byte(strings.Join(include, ",")))
	dir := filepath.Join(cache, fmt.Sprintf("%s-%x", name, sum[:4]))
	if _, err := os.Stat(filepath.Join(dir, "etc/os-release")); err == nil {
		return dir
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("end-to-end test needs debootstrap (apt-get install debootstrap) to build its " + name)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	// Test processes run at once (two go test runs, or tests made
	// parallel) build the tree once: the first holds the lock, the others
	// find the tree when they get it.
	unlock, err := atomicfile.Lock(cache, dir+".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "etc/os-release")); err == nil {
		return dir
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	start := time.Now()
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include="+strings.Join(include, ","), "bookworm", tmp, debianMirror())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("debootstrap: %v\n%s", err, tail(string(out), 3000))
	}
	if finish != nil {
		if err := finish(tmp); err != nil {
			t.Fatalf("finishing %s: %v", name, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %s", name, time.Since(start).Round(time.Second))
	return dir
}

// createAll creates the machines of specs at once and fails the test,
// naming each machine that Create refused.
func createAll(t *testing.T, ctx context.Context, m *machine.Manager, specs []machine.Spec) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i := range specs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.Create(ctx, specs[i]) }()
	}
	wg.Wait()
	failed := false
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create %s: %v", specs[i].Name, err)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}

// debianMirror is the mirror the host's apt uses (the only one reachable).
func debianMirror() string {
	if m := os.Getenv("KILN_E2E_MIRROR"); m != "" {
		return m
	}
	data, _ := os.ReadFile("/etc/apt/sources.list.d/debian.sources")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "URIs:" && !strings.Contains(f[1], "security") {
			return f[1]
		}
	}
	return "http://deb.debian.org/debian"
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// dumpMachine writes a machine's console, journal and failed units to a
// file, for failures, and logs only where: a test's own failure stays the
// last thing it printed, which is what a log's tail (CI's excerpt) shows.
// The file is in $KILN_E2E_ARTIFACTS when set, else in the temporary
// directory, kept after the test.
func dumpMachine(t *testing.T, m *machine.Manager, stateRoot, name string) {
	t.Helper()
	var b strings.Builder
	console, _ := os.ReadFile(filepath.Join(stateRoot, name, "console.log"))
	fmt.Fprintf(&b, "=== console of %s ===\n%s\n", name, tail(string(console), 8000))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := m.Exec(ctx, name, "journalctl", "--no-pager", "-n", "300", "-o", "short-monotonic")
	fmt.Fprintf(&b, "=== journal of %s (err %v) ===\n%s\n", name, err, tail(string(out), 30000))
	out, _ = m.Exec(ctx, name, "systemctl", "--no-pager", "--failed")
	fmt.Fprintf(&b, "=== failed units of %s ===\n%s", name, out)
	path := artifactPath(t, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Logf("%s (writing it to %s: %v)", b.String(), path, err)
		return
	}
	t.Logf("console, journal and failed units of %s: %s", name, path)
}

// leftovers lists what of the machines is still on the host: mounts below
// stateRoot, veths, cgroups and processes mentioning stateRoot.
func leftovers(t *testing.T, stateRoot string, names, veths []string) []string {
	t.Helper()
	var found []string
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, stateRoot) {
			found = append(found, "mount: "+line)
		}
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, v := range veths {
		if v != "" && bytes.Contains(links, []byte(" "+v+"@")) || v != "" && bytes.Contains(links, []byte(" "+v+":")) {
			found = append(found, "link: "+v)
		}
	}
	for _, n := range names {
		cg, _ := filepath.Glob("/sys/fs/cgroup/*/kiln/" + n)
		cg2, _ := filepath.Glob("/sys/fs/cgroup/kiln/" + n)
		for _, c := range append(cg, cg2...) {
			found = append(found, "cgroup: "+c)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if bytes.Contains(data, []byte(stateRoot)) {
			found = append(found, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), bytes.ReplaceAll(data, []byte{0}, []byte{' '})))
		}
	}
	return found
}

// freeSubnet returns a /24 in 10.x not used by any host address.
func freeSubnet(t *testing.T, third int) string {
	t.Helper()
	out, _ := exec.Command("ip", "-o", "addr", "show").Output()
	for i := 0; i < 50; i++ {
		s := fmt.Sprintf("10.%d.%d.", 200+i, third)
		if !bytes.Contains(out, []byte(" "+s)) {
			return s
		}
	}
	t.Fatal("no free 10.x subnet")
	return ""
}

// removeStateRoot removes a test's state root, refusing while anything is
// mounted below it.
func removeStateRoot(t *testing.T, dir string) {
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mounts, []byte(dir)) {
		t.Errorf("not removing %s: still mounted", dir)
		return
	}
	os.RemoveAll(dir)
}

// hostProcessAlive says whether pid runs (and is not a zombie).
func hostProcessAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i > 0 && i+2 < len(data) && data[i+2] != 'Z'
}

// hostHolds reports whether ip is an address of one of this host's
// interfaces (the cluster's bridge holds the VIP). Only then do requests to
// it stay on the machine.
func hostHolds(ip string) bool {
	want := net.ParseIP(ip)
	addrs, err := net.InterfaceAddrs()
	if want == nil || err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(want) {
			return true
		}
	}
	return false
}
