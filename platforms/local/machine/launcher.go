package machine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// limits are a machine's resource limits; zero is unlimited.
type limits struct {
	CPUs        float64
	MemoryBytes int64
}

// launcher starts a machine's nspawn process in the machine's own cgroup
// and removes that cgroup again. One implementation per start strategy.
type launcher interface {
	// Mode is the cgroup mode the launcher implements.
	Mode() CgroupMode
	// Start starts nspawn detached and returns its pid.
	Start(ctx context.Context, name string, lim limits, nspawn []string, logPath string) (int, error)
	// Cleanup kills what is left in the machine's cgroups and removes them.
	Cleanup(ctx context.Context, name string) error
	// Names lists the machines that have a cgroup.
	Names(ctx context.Context) []string
}

// startScript moves the shell into each cgroup.procs file named before
// "--", then replaces itself by the command after it; so nspawn starts in
// the machine's cgroups without moving the caller. The environment variable
// would switch nspawn to a cgroup2-only machine without controllers.
const startScript = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 1; shift; done; shift; unset SYSTEMD_NSPAWN_UNIFIED_HIERARCHY; exec "$@"`

// directStartArgv is the command line that starts nspawn from the cgroups
// whose cgroup.procs files are given.
func directStartArgv(procs, nspawn []string) []string {
	argv := []string{"/bin/sh", "-c", startScript, "kiln-machine-start"}
	argv = append(argv, procs...)
	argv = append(argv, "--")
	return append(argv, nspawn...)
}

// directLauncher starts machines from cgroups it creates itself: hosts
// without systemd as PID 1.
type directLauncher struct {
	layout CgroupLayout
	mode   CgroupMode
	run    Runner
}

func (d *directLauncher) Mode() CgroupMode { return d.mode }

func (d *directLauncher) Start(ctx context.Context, name string, lim limits, nspawn []string, logPath string) (int, error) {
	dirs := d.layout.machineCgroups(name)
	procs := make([]string, 0, len(dirs))
	for _, dir := range dirs {
		if err := d.makeCgroup(dir); err != nil {
			return 0, err
		}
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	for _, f := range d.layout.limitFiles(d.mode, name, lim.CPUs, lim.MemoryBytes) {
		if err := os.WriteFile(f.Path, []byte(f.Value), 0o644); err != nil {
			return 0, fmt.Errorf("setting limit %s=%s: %w", f.Path, f.Value, err)
		}
	}
	return d.run.Detach(directStartArgv(procs, nspawn), logPath)
}

// makeCgroup creates dir and its parent. A new cpuset cgroup starts with
// no CPUs and memory nodes: copy them from the parent. In the unified
// hierarchy, hand the memory, cpu and pids controllers down to the
// machine's cgroup.
func (d *directLauncher) makeCgroup(dir string) error {
	parent := filepath.Dir(dir)
	var err error
	for range 3 { // another machine's Cleanup may remove the empty parent meanwhile
		if err = os.MkdirAll(dir, 0o755); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("creating cgroup: %w", err)
	}
	for _, p := range []string{parent, dir} {
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			own := filepath.Join(p, f)
			if cur, err := os.ReadFile(own); err == nil && strings.TrimSpace(string(cur)) == "" {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(p), f))
				if err == nil {
					err = os.WriteFile(own, v, 0o644)
				}
				if err != nil {
					return fmt.Errorf("initialising %s: %w", own, err)
				}
			}
		}
	}
	if d.mode == CgroupV2 {
		root := filepath.Dir(parent)
		for _, p := range []string{root, parent} {
			_ = os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0o644)
		}
	}
	return nil
}

func (d *directLauncher) Cleanup(ctx context.Context, name string) error {
	var errs []error
	dirs := d.layout.machineCgroups(name)
	// Thaw first, in every hierarchy: a frozen process ignores SIGKILL
	// and keeps the machine's cgroups busy in all the others, which come
	// before the freezer hierarchy.
	for _, dir := range dirs {
		thawTree(dir)
	}
	for _, dir := range dirs {
		if err := removeCgroupTree(ctx, dir); err != nil {
			errs = append(errs, err)
		}
		// The shared parent goes with the last machine; it fails while
		// other machines exist.
		_ = syscall.Rmdir(filepath.Dir(dir))
	}
	return errors.Join(errs...)
}

func (d *directLauncher) Names(ctx context.Context) []string {
	seen := map[string]bool{}
	var names []string
	for _, h := range d.layout.Hierarchies {
		ents, _ := os.ReadDir(filepath.Join(h.Path, cgroupParent))
		for _, e := range ents {
			if e.IsDir() && nameRE.MatchString(e.Name()) && !seen[e.Name()] {
				seen[e.Name()] = true
				names = append(names, e.Name())
			}
		}
	}
	return names
}

// cgroupTree lists the cgroup tree at dir, parents before children; a
// cgroup removed meanwhile is left out.
func cgroupTree(dir string) []string {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile: nothing to list below it
		}
		if e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs
}

// thawTree thaws every cgroup of the tree at dir, parents first: a child
// stays frozen while its parent is.
func thawTree(dir string) {
	for _, d := range cgroupTree(dir) {
		thaw(d)
	}
}

// removeCgroupTree kills every process left in the cgroup tree at dir (a
// machine's pods, kubelet's leftovers) and removes the tree, deepest first.
func removeCgroupTree(ctx context.Context, dir string) error {
	var (
		dirs   []string
		failed error
	)
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		dirs, failed = cgroupTree(dir), nil
		for _, d := range dirs {
			thaw(d)
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			for _, pid := range cgroupPIDs(dirs[i]) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				failed = fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
			}
		}
		return failed == nil, nil
	})
	if failed == nil {
		return nil
	}
	var left []int
	for _, d := range dirs {
		left = append(left, cgroupPIDs(d)...)
	}
	if len(left) > 0 {
		failed = fmt.Errorf("%w (processes left: %s)", failed, describeProcs("/proc", left, 5))
	}
	return failed
}

// describeProcs names up to limit of pids as "pid (comm) state" from the
// stat files under procDir, so an error says what would not die; "D" is a
// process stuck in the kernel.
func describeProcs(procDir string, pids []int, limit int) string {
	var out []string
	for i, pid := range pids {
		if i == limit {
			out = append(out, fmt.Sprintf("and %d more", len(pids)-limit))
			break
		}
		desc := strconv.Itoa(pid)
		stat, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
		// The format is "pid (comm) state ..."; comm may hold spaces and
		// parentheses, so it ends at the last ')'.
		if open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')'); err == nil && open >= 0 && end > open {
			if f := strings.Fields(string(stat[end+1:])); len(f) > 0 {
				desc = fmt.Sprintf("%d %s %s", pid, stat[open:end+1], f[0])
			}
		}
		out = append(out, desc)
	}
	return strings.Join(out, ", ")
}

// thaw unfreezes a cgroup: a frozen process never dies of SIGKILL, so its
// cgroup could never be removed. runc freezes a container's cgroup while it
// sets it up; a machine killed at that moment (a crash, a host reboot)
// leaves it frozen. v1 has freezer.state, v2 cgroup.freeze; a cgroup
// without them is left alone.
func thaw(dir string) {
	if data, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil && strings.TrimSpace(string(data)) != "THAWED" {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); err == nil && strings.TrimSpace(string(data)) != "0" {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
	}
}

// cgroupPIDs returns the processes in one cgroup.
func cgroupPIDs(dir string) []int {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// systemdUnit is the transient unit running a machine on systemd hosts.
func systemdUnit(name string) string { return "kiln-" + name + ".service" }

// systemdRunArgv is the command line that starts nspawn as a transient
// unit with delegated cgroup controllers and the machine's limits.
func systemdRunArgv(name string, lim limits, logPath string, nspawn []string) []string {
	argv := []string{"systemd-run",
		"--unit=" + systemdUnit(name),
		"--description=kiln machine " + name,
		"--collect",
		"--property=Delegate=yes",
		"--property=KillMode=mixed",
		"--property=Type=simple",
		"--property=StandardOutput=append:" + logPath,
		"--property=StandardError=append:" + logPath,
	}
	if lim.MemoryBytes > 0 {
		argv = append(argv, "--property=MemoryMax="+strconv.FormatInt(lim.MemoryBytes, 10))
	}
	if lim.CPUs > 0 {
		argv = append(argv, "--property=CPUQuota="+strconv.Itoa(int(math.Round(lim.CPUs*100)))+"%")
	}
	argv = append(argv, "--")
	return append(argv, nspawn...)
}

// systemdLauncher runs each machine as a transient systemd unit: hosts
// whose PID 1 is systemd.
type systemdLauncher struct {
	run Runner
}

func (s *systemdLauncher) Mode() CgroupMode { return CgroupSystemd }

func (s *systemdLauncher) Start(ctx context.Context, name string, lim limits, nspawn []string, logPath string) (int, error) {
	if _, err := s.run.Run(ctx, systemdRunArgv(name, lim, logPath, nspawn)...); err != nil {
		return 0, err
	}
	out, err := s.run.Run(ctx, "systemctl", "show", "--property=MainPID", "--value", systemdUnit(name))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("unit %s has no main process (MainPID=%q)", systemdUnit(name), strings.TrimSpace(string(out)))
	}
	return pid, nil
}

func (s *systemdLauncher) Cleanup(ctx context.Context, name string) error {
	// Both fail harmlessly when the unit is already gone.
	_, _ = s.run.Run(ctx, "systemctl", "stop", systemdUnit(name))
	_, _ = s.run.Run(ctx, "systemctl", "reset-failed", systemdUnit(name))
	return nil
}

func (s *systemdLauncher) Names(ctx context.Context) []string {
	out, err := s.run.Run(ctx, "systemctl", "list-units", "--all", "--plain", "--no-legend", "kiln-*.service")
	if err != nil {
		return nil
	}
	// The host daemons' units (kiln-lb-<infraID>.service, ...) share the
	// prefix; a machine's unit is the one described as "kiln machine <name>".
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || !strings.HasPrefix(f[0], "kiln-") || !strings.HasSuffix(f[0], ".service") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(f[0], "kiln-"), ".service")
		if f[4] == "kiln" && f[5] == "machine" && f[6] == name {
			names = append(names, name)
		}
	}
	return names
}

func itoa(i int) string { return strconv.Itoa(i) }
