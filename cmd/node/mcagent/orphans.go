package mcagent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A container the runtime was creating when its creator went away (the
// kubelet replaced the static pod, the pod was deleted) may leave its
// `runc init` behind: orphaned (its parent PID 1, where a running
// runtime's shim is its parent), waiting for a start that will not come.
// On cgroup v1 with the systemd driver runc freezes the container's cgroup
// while it sets the cgroup up, and an init left then stays frozen, which
// no signal ends: the kubelet cannot remove the old pod's cgroup and never
// starts its replacement (an e2e upgrade of etcd on ssh hosts stopped
// there). reapOrphanInits thaws and kills each such init, as the reset of
// an ssh host does (thaw_pods, orphan_runc_inits).

// OrphanFS is where reapOrphanInits looks: /proc and /sys/fs/cgroup on a
// node (NodeOrphanFS).
type OrphanFS struct {
	Proc, Cgroup string
}

// NodeOrphanFS is the node's own.
func NodeOrphanFS() *OrphanFS { return &OrphanFS{Proc: "/proc", Cgroup: "/sys/fs/cgroup"} }

// reapOrphanInits thaws the cgroup of every orphaned runc init in a pod's
// cgroup (kubepods) and kills it; it returns their PIDs.
func reapOrphanInits(fsys *OrphanFS) ([]int, error) {
	entries, err := os.ReadDir(fsys.Proc)
	if err != nil {
		return nil, err
	}
	var reaped []int
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !orphanInit(fsys.Proc, pid) {
			continue
		}
		groups, err := os.ReadFile(filepath.Join(fsys.Proc, e.Name(), "cgroup"))
		if err != nil || !bytes.Contains(groups, []byte("kubepods")) {
			continue
		}
		thaw(fsys.Cgroup, string(groups))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing the orphaned runc init %d: %w", pid, err))
			continue
		}
		reaped = append(reaped, pid)
	}
	return reaped, errors.Join(errs...)
}

// orphanInit reports whether pid is a `runc init` whose parent is PID 1.
func orphanInit(proc string, pid int) bool {
	cmdline, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) != 2 || filepath.Base(args[0]) != "runc" || args[1] != "init" {
		return false
	}
	stat, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
	f := strings.Fields(rest)
	return len(f) > 1 && f[1] == "1"
}

// thaw thaws the freezer cgroups a /proc/<pid>/cgroup file names: the v1
// freezer hierarchy's freezer.state, the unified hierarchy's
// cgroup.freeze. Errors are left for the kill to show.
func thaw(root, groups string) {
	for _, line := range strings.Split(groups, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "kubepods") {
			continue
		}
		switch {
		case parts[1] == "freezer":
			writeExisting(filepath.Join(root, "freezer", parts[2], "freezer.state"), "THAWED")
		case parts[0] == "0" && parts[1] == "":
			// cgroup v2 at the root, or the unified hierarchy of a
			// hybrid host.
			for _, base := range []string{root, filepath.Join(root, "unified")} {
				writeExisting(filepath.Join(base, parts[2], "cgroup.freeze"), "0")
			}
		}
	}
}

// writeExisting writes data into the existing file name (a cgroup
// control file), creating nothing.
func writeExisting(name, data string) {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	f.WriteString(data)
	f.Close()
}
