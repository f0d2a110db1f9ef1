package machine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// CgroupMode is how machines get their cgroup and resource limits.
type CgroupMode string

// Cgroup modes, chosen by DetectCgroups.
const (
	// CgroupSystemd runs each machine as a transient systemd unit
	// (systemd-run, Delegate=yes, MemoryMax=, CPUQuota=): hosts whose PID 1
	// is systemd.
	CgroupSystemd CgroupMode = "systemd"
	// CgroupV1 starts each machine from cgroups kiln creates in every v1
	// hierarchy, limits in memory.limit_in_bytes and cpu.cfs_quota_us:
	// legacy and hybrid hosts without systemd as PID 1.
	CgroupV1 CgroupMode = "cgroup-v1"
	// CgroupV2 starts each machine from a cgroup kiln creates in the
	// unified hierarchy, limits in memory.max and cpu.max: pure cgroup v2
	// hosts with the memory and cpu controllers, without systemd as PID 1.
	CgroupV2 CgroupMode = "cgroup-v2"
	// CgroupNoLimits starts each machine from cgroups of its own but no
	// limit can be enforced: the host offers neither v1 memory/cpu
	// hierarchies nor v2 controllers.
	CgroupNoLimits CgroupMode = "no-limits"
)

// cgroupParent is the cgroup, in every hierarchy, under which each machine
// gets its own cgroup <parent>/<name>.
const cgroupParent = "kiln"

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	// Path is the mount point, e.g. /sys/fs/cgroup/memory.
	Path string
	// Controllers are the v1 controllers, e.g. ["cpu"] or ["name=systemd"];
	// for the unified hierarchy, the controllers it offers.
	Controllers []string
	// Unified is true for the cgroup2 hierarchy.
	Unified bool
}

// CgroupLayout is the host's cgroup setup.
type CgroupLayout struct {
	// Hierarchies are the mounted hierarchies, v1 first.
	Hierarchies []Hierarchy
	// SystemdPID1 is true when PID 1 is systemd.
	SystemdPID1 bool
}

// DetectCgroups reads the host's cgroup mounts and init system.
func DetectCgroups() (CgroupLayout, error) { return detectCgroups("/") }

// detectCgroups reads the cgroup mounts and init system of the host whose
// /proc, /sys and /run are under root ("/" but in tests). Hierarchy paths
// are the host's (mount points), without root.
func detectCgroups(root string) (CgroupLayout, error) {
	mi, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return CgroupLayout{}, fmt.Errorf("reading cgroup mounts: %w", err)
	}
	l := CgroupLayout{Hierarchies: parseCgroupMounts(string(mi))}
	for i, h := range l.Hierarchies {
		if h.Unified {
			data, _ := os.ReadFile(filepath.Join(root, h.Path, "cgroup.controllers"))
			l.Hierarchies[i].Controllers = strings.Fields(string(data))
		}
	}
	comm, _ := os.ReadFile(filepath.Join(root, "proc/1/comm"))
	_, booted := os.Stat(filepath.Join(root, "run/systemd/system"))
	l.SystemdPID1 = strings.TrimSpace(string(comm)) == "systemd" && booted == nil
	return l, nil
}

// parseCgroupMounts returns the cgroup hierarchies in a mountinfo text,
// keeping the first mount of each.
func parseCgroupMounts(mountinfo string) []Hierarchy {
	var v1, v2 []Hierarchy
	seen := map[string]bool{}
	for _, m := range parseMountinfo(mountinfo) {
		switch m.FSType {
		case "cgroup":
			var ctrls []string
			for _, o := range strings.Split(m.SuperOptions, ",") {
				if isV1Controller(o) {
					ctrls = append(ctrls, o)
				}
			}
			key := strings.Join(ctrls, ",")
			if len(ctrls) == 0 || seen[key] {
				continue
			}
			seen[key] = true
			v1 = append(v1, Hierarchy{Path: m.MountPoint, Controllers: ctrls})
		case "cgroup2":
			if len(v2) == 0 {
				v2 = append(v2, Hierarchy{Path: m.MountPoint, Unified: true})
			}
		}
	}
	return append(v1, v2...)
}

func isV1Controller(opt string) bool {
	if strings.HasPrefix(opt, "name=") {
		return true
	}
	switch opt {
	case "cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio",
		"blkio", "perf_event", "hugetlb", "pids", "rdma", "misc":
		return true
	}
	return false
}

// ForcesV1 reports whether machines get cgroup v1: the host's memory
// controller is in a v1 hierarchy (a v1 or hybrid host), which nspawn then
// mounts inside each machine.
func (l CgroupLayout) ForcesV1() bool {
	_, v1 := l.hierarchy("memory")
	return v1
}

// hierarchy returns the v1 hierarchy holding ctrl, or the unified one when
// ctrl is "".
func (l CgroupLayout) hierarchy(ctrl string) (Hierarchy, bool) {
	for _, h := range l.Hierarchies {
		if (ctrl == "" && h.Unified) || (!h.Unified && slices.Contains(h.Controllers, ctrl)) {
			return h, true
		}
	}
	return Hierarchy{}, false
}

// Mode chooses how machines are started on this layout.
func (l CgroupLayout) Mode() CgroupMode {
	_, mem := l.hierarchy("memory")
	_, cpu := l.hierarchy("cpu")
	u, unified := l.hierarchy("")
	switch {
	case l.SystemdPID1:
		return CgroupSystemd
	case mem && cpu:
		return CgroupV1
	case unified && slices.Contains(u.Controllers, "memory") && slices.Contains(u.Controllers, "cpu"):
		return CgroupV2
	}
	return CgroupNoLimits
}

// Describe says in one sentence what the mode enforces.
func (m CgroupMode) Describe() string {
	switch m {
	case CgroupSystemd:
		return "each machine is a transient systemd unit (systemd-run, Delegate=yes); memory and CPU limits are enforced by MemoryMax= and CPUQuota="
	case CgroupV1:
		return "each machine runs in its own cgroup in every v1 hierarchy (/sys/fs/cgroup/<controller>/kiln/<machine>); memory and CPU limits are enforced by memory.limit_in_bytes and cpu.cfs_quota_us"
	case CgroupV2:
		return "each machine runs in its own cgroup v2 group (kiln/<machine>); memory and CPU limits are enforced by memory.max and cpu.max"
	}
	return "each machine runs in cgroups of its own, but the host offers no memory or cpu controller: resource limits are NOT enforced, and kubelet cannot run in the machines"
}

// Enforced is true when the mode enforces memory and CPU limits.
func (m CgroupMode) Enforced() bool { return m != CgroupNoLimits }

// machineCgroups returns a machine's cgroup directory in every hierarchy.
func (l CgroupLayout) machineCgroups(name string) []string {
	dirs := make([]string, 0, len(l.Hierarchies))
	for _, h := range l.Hierarchies {
		dirs = append(dirs, filepath.Join(h.Path, cgroupParent, name))
	}
	return dirs
}

// limitFile is one cgroup file to write and its value.
type limitFile struct {
	Path, Value string
}

// cfsPeriod is the CPU quota period in microseconds.
const cfsPeriod = 100000

// limitFiles returns the files that carry a machine's limits in mode.
func (l CgroupLayout) limitFiles(mode CgroupMode, name string, cpus float64, mem int64) []limitFile {
	var files []limitFile
	quota := int64(cpus * cfsPeriod)
	switch mode {
	case CgroupV1:
		if h, ok := l.hierarchy("memory"); ok && mem > 0 {
			files = append(files, limitFile{filepath.Join(h.Path, cgroupParent, name, "memory.limit_in_bytes"), fmt.Sprint(mem)})
		}
		if h, ok := l.hierarchy("cpu"); ok && quota > 0 {
			dir := filepath.Join(h.Path, cgroupParent, name)
			files = append(files,
				limitFile{filepath.Join(dir, "cpu.cfs_period_us"), fmt.Sprint(cfsPeriod)},
				limitFile{filepath.Join(dir, "cpu.cfs_quota_us"), fmt.Sprint(quota)})
		}
	case CgroupV2:
		h, _ := l.hierarchy("")
		files = unifiedLimitFiles(filepath.Join(h.Path, cgroupParent, name), limits{CPUs: cpus, MemoryBytes: mem})
	}
	return files
}

// payloadCgroup is the child cgroup nspawn runs a machine in when it is
// started with --keep-unit on a unified hierarchy (nspawn moves itself to a
// sibling, "supervisor"): the root of the machine's cgroup namespace.
const payloadCgroup = "payload"

// limitInitCgroup writes a machine's limits into the cgroup v2 group its
// init runs in, read from <procDir>/<leader>/cgroup: nspawn's payload group
// below the cgroup that carries them (the machine's unit, or kiln/<name>).
// The limits on the parent are enforced either way; written here too, the
// machine sees them as its own memory.max and cpu.max, as it sees
// memory.limit_in_bytes on cgroup v1. It waits up to 10 s for nspawn to
// move the init there and enable the controllers. Where machines get
// cgroup v1 there is nothing to write.
func (l CgroupLayout) limitInitCgroup(ctx context.Context, procDir string, leader int, lim limits) error {
	u, ok := l.hierarchy("")
	if !ok || l.ForcesV1() || (lim.MemoryBytes <= 0 && lim.CPUs <= 0) {
		return nil
	}
	var files []limitFile
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(leader), "cgroup"))
		if err != nil {
			return false, fmt.Errorf("reading the init's cgroup: %w", err)
		}
		var path string
		for _, line := range strings.Split(string(data), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				path = p
			}
		}
		if filepath.Base(path) != payloadCgroup {
			return false, nil
		}
		files = unifiedLimitFiles(filepath.Join(u.Path, path), lim)
		for _, f := range files {
			if _, err := os.Stat(f.Path); err != nil {
				return false, nil // the controller is not enabled there yet
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the machine's own cgroup shows no limits (enforced on its parent): %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(f.Path, []byte(f.Value), 0o644); err != nil {
			return fmt.Errorf("setting limit %s=%s: %w", f.Path, f.Value, err)
		}
	}
	return nil
}

// unifiedLimitFiles are the cgroup v2 files in dir that carry lim.
func unifiedLimitFiles(dir string, lim limits) []limitFile {
	var files []limitFile
	if lim.MemoryBytes > 0 {
		files = append(files, limitFile{filepath.Join(dir, "memory.max"), fmt.Sprint(lim.MemoryBytes)})
	}
	if quota := int64(lim.CPUs * cfsPeriod); quota > 0 {
		files = append(files, limitFile{filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quota, cfsPeriod)})
	}
	return files
}
