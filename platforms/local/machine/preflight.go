package machine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// InotifyInstancesPerMachine is the fs.inotify.max_user_instances budget
// per machine. The limit is per user and every machine runs as the host's
// root: four Kubernetes nodes used 55 instances together (about 14 each);
// the budget leaves room for pods that watch files.
const InotifyInstancesPerMachine = 32

// PreflightOptions say what the host must be ready for.
type PreflightOptions struct {
	// Machines is the number of machines that will run at once.
	Machines int
	// StateRoot is where machines will keep their disks; empty means
	// DefaultStateRoot. It must not be on overlayfs.
	StateRoot string
}

// Report is what Preflight found.
type Report struct {
	// Mode is the cgroup mode machines will run in.
	Mode CgroupMode
	// LimitsEnforced is true when memory and CPU limits are enforced.
	LimitsEnforced bool
	// Problems stop machines from working; Preflight's error lists them.
	Problems []string
	// Warnings are worth telling the user.
	Warnings []string
	// Notes say what kiln does to (and does not change on) the host.
	Notes []string
}

// PreflightError lists the problems that stop machines from running here.
type PreflightError struct {
	// Problems are the problems, each with the command that fixes it.
	Problems []string
}

// Error lists the problems.
func (e *PreflightError) Error() string {
	return "the host cannot run kiln machines:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// hostProbe is how Preflight looks at the host; tests replace it.
type hostProbe struct {
	euid      func() int
	lookPath  func(string) (string, error)
	readFile  func(string) ([]byte, error)
	cgroups   func() (CgroupLayout, error)
	inotify   func() int // inotify instances root holds now
	onOverlay func(path string) bool
}

func realProbe() hostProbe {
	return hostProbe{euid: os.Geteuid, lookPath: exec.LookPath, readFile: os.ReadFile,
		cgroups: DetectCgroups, inotify: rootInotifyInstances, onOverlay: onOverlayFS}
}

// Preflight checks that the host can run opts.Machines machines and says
// in which cgroup mode they run. The error, a *PreflightError, lists every
// problem with its fix. Preflight changes nothing on the host.
func Preflight(ctx context.Context, opts PreflightOptions) (Report, error) {
	return preflight(opts, realProbe())
}

func preflight(opts PreflightOptions, p hostProbe) (Report, error) {
	var r Report
	if p.euid() != 0 {
		r.Problems = append(r.Problems, "kiln's local platform runs machines with systemd-nspawn and must run as root")
	}
	tools := []struct{ name, pkg string }{
		{"systemd-nspawn", "systemd-container"}, {"nsenter", "util-linux"}, {"mount", "mount"},
		{"umount", "mount"}, {"ip", "iproute2"}, {"cp", "coreutils"},
	}
	for _, t := range tools {
		if _, err := p.lookPath(t.name); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s is missing: apt-get install %s", t.name, t.pkg))
		}
	}
	if fss, err := p.readFile("/proc/filesystems"); err == nil && !strings.Contains(string(fss), "\toverlay\n") {
		r.Problems = append(r.Problems, "the kernel has no overlayfs (machine roots are copy-on-write overlays): modprobe overlay")
	}
	checkInotify(&r, opts.Machines, p)
	root := opts.StateRoot
	if root == "" {
		root = DefaultStateRoot
	}
	if p.onOverlay(root) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s is on overlayfs, which cannot hold the machines' overlay upper directories: choose a state directory on another file system", root))
	}

	layout, err := p.cgroups()
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.Mode = layout.Mode()
		r.LimitsEnforced = r.Mode.Enforced()
		r.Notes = append(r.Notes, "cgroup mode "+string(r.Mode)+": "+r.Mode.Describe())
		if !r.LimitsEnforced {
			r.Warnings = append(r.Warnings, "machine memory and CPU limits are NOT enforced on this host (no memory/cpu cgroup controller available)")
		}
	}
	r.Notes = append(r.Notes,
		"host sysctls are left alone: machines see the values kubelet wants (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1) through read-only files bound over /proc/sys inside each machine",
		"host changes while machines exist: one bridge, one veth, one overlay mount and one cgroup per hierarchy per machine; no routes, NAT or forwarding; all removed on destroy")
	if len(r.Problems) > 0 {
		return r, &PreflightError{Problems: r.Problems}
	}
	return r, nil
}

// checkInotify checks that root's inotify instance limit leaves room for
// the machines.
func checkInotify(r *Report, machines int, p hostProbe) {
	data, err := p.readFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		r.Warnings = append(r.Warnings, "cannot read fs.inotify.max_user_instances: "+err.Error())
		return
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return
	}
	used := p.inotify()
	need := used + machines*InotifyInstancesPerMachine
	if max < need {
		want := 512
		for want < need {
			want *= 2
		}
		r.Problems = append(r.Problems, fmt.Sprintf(
			"fs.inotify.max_user_instances is %d, %d are in use and %d machines need about %d more (%d each): "+
				"run `sysctl -w fs.inotify.max_user_instances=%d` (persist it in /etc/sysctl.d/90-kiln.conf)",
			max, used, machines, machines*InotifyInstancesPerMachine, InotifyInstancesPerMachine, want))
	}
}

// rootInotifyInstances counts the inotify instances held by root's
// processes: the limit is per user, shared by the host and every machine.
func rootInotifyInstances() int {
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && link == "anon_inode:inotify" {
			st, err := os.Stat(filepath.Dir(filepath.Dir(fd)))
			if err == nil && ownerUID(st) == 0 {
				n++
			}
		}
	}
	return n
}

// overlayfsMagic is the f_type statfs(2) reports for overlayfs.
const overlayfsMagic = 0x794c7630

// onOverlayFS says whether path, or its nearest existing ancestor, is on
// overlayfs.
func onOverlayFS(path string) bool {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(p, &st); err == nil {
			return st.Type == overlayfsMagic
		}
		if p == "/" {
			return false
		}
	}
}

// ownerUID returns the owner of a file, -1 when unknown.
func ownerUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
