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

// MinMachineMemory is the memory Preflight wants available per machine to
// start: a master uses 350-480 MiB once installed, a worker 70-140 MiB
// (docs/benchmarks.md), plus the kernel's share for its page cache.
const MinMachineMemory = 512 << 20

// PreflightOptions say what the host must be ready for.
type PreflightOptions struct {
	// Machines is the number of machines that will run at once.
	Machines int
	// MemoryLimits are the memory limits in bytes of the machines to
	// start (0: no limit); their sum is compared with the host's memory.
	MemoryLimits []int64
	// StateRoot is where machines will keep their disks; empty means
	// DefaultStateRoot. It must not be on overlayfs.
	StateRoot string
	// SlowerControlPlane says install-config sets controlPlaneHardwareSpeed
	// Slower; on a host whose CPUs are emulated Preflight warns without it.
	SlowerControlPlane bool
	// EgressNAT says install-config sets networking.egress NAT: the host
	// then masquerades the machine network (Egress), which needs nft.
	EgressNAT bool
}

// Report is what Preflight found.
type Report struct {
	// Mode is the cgroup mode machines will run in.
	Mode CgroupMode
	// LimitsEnforced is true when memory and CPU limits are enforced.
	LimitsEnforced bool
	// Problems stop machines from working; Preflight's error lists them.
	Problems []Problem
	// Warnings are worth telling the user.
	Warnings []string
	// Notes say what kiln does to (and does not change on) the host.
	Notes []string
}

// Problem is one thing the host lacks, with its fix.
type Problem struct {
	// Check names what is checked: one of the Check* constants, with
	// ":<name>" for a kernel feature or an environment variable.
	Check string
	// Message says what is wrong and how to fix it.
	Message string
}

// The checks a Problem can come from.
const (
	CheckRoot      = "root"
	CheckTool      = "tool"    // CheckTool + ":" + the missing program
	CheckKernel    = "kernel"  // CheckKernel + ":" + overlay, bridge, veth, ip_set, xt_set or br_netfilter
	CheckCgroups   = "cgroups" // no systemd and no usable controllers
	CheckMemory    = "memory"  // too little memory available
	CheckEnv       = "env"     // CheckEnv + ":" + the variable
	CheckInotify   = "inotify" // fs.inotify.max_user_instances
	CheckStateRoot = "stateRoot"
	CheckDNSPort   = "dnsPort" // a server holds port 53 of every address (egress NAT)
)

// PreflightError lists the problems that stop machines from running here.
type PreflightError struct {
	// Problems are the problems, each with its fix.
	Problems []Problem
}

// Error lists the problems.
func (e *PreflightError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	return "the host cannot run kiln machines:\n  - " + strings.Join(msgs, "\n  - ")
}

// hostProbe is how Preflight looks at the host; tests replace it with a
// fake /proc, /sys and /lib/modules tree (root) and functions.
type hostProbe struct {
	root      string // "/" on the host
	euid      func() int
	lookPath  func(string) (string, error)
	environ   func() []string
	inotify   func() int // inotify instances root holds now
	onOverlay func(path string) bool
}

func realProbe() hostProbe {
	return hostProbe{root: "/", euid: os.Geteuid, lookPath: exec.LookPath, environ: os.Environ,
		inotify: rootInotifyInstances, onOverlay: onOverlayFS}
}

// read returns the content of the host's file at path.
func (p hostProbe) read(path string) ([]byte, error) {
	return os.ReadFile(filepath.Join(p.root, path))
}

// exists reports whether the host's path exists.
func (p hostProbe) exists(path string) bool {
	_, err := os.Stat(filepath.Join(p.root, path))
	return err == nil
}

// Preflight checks that the host can run opts.Machines machines and says
// in which cgroup mode they run. The error, a *PreflightError, lists every
// problem with its fix. Preflight changes nothing on the host.
func Preflight(ctx context.Context, opts PreflightOptions) (Report, error) {
	return preflight(opts, realProbe())
}

func preflight(opts PreflightOptions, p hostProbe) (Report, error) {
	var r Report
	problem := func(check, format string, args ...any) {
		r.Problems = append(r.Problems, Problem{Check: check, Message: fmt.Sprintf(format, args...)})
	}
	if p.euid() != 0 {
		problem(CheckRoot, "kiln's local platform runs machines with systemd-nspawn and must run as root")
	}
	tools := []struct{ name, pkg string }{
		{"systemd-nspawn", "systemd-container"}, {"nsenter", "util-linux"}, {"mount", "mount"},
		{"umount", "mount"}, {"ip", "iproute2"}, {"cp", "coreutils"},
	}
	if opts.EgressNAT {
		tools = append(tools, struct{ name, pkg string }{"nft", "nftables"})
	}
	for _, t := range tools {
		if _, err := p.lookPath(t.name); err != nil {
			problem(CheckTool+":"+t.name, "%s is missing: apt-get install %s", t.name, t.pkg)
		}
	}
	checkKernel(problem, p)
	checkCgroups(&r, problem, p)
	checkMemory(&r, problem, opts, p)
	checkEmulatedCPU(&r, opts, p)
	checkEnv(problem, p)
	checkInotify(&r, problem, opts.Machines, p)
	if opts.EgressNAT {
		checkDNSPort(problem, p)
	}
	root := opts.StateRoot
	if root == "" {
		root = DefaultStateRoot
	}
	if p.onOverlay(root) {
		problem(CheckStateRoot, "%s is on overlayfs, which cannot hold the machines' overlay upper directories: choose a state directory on another file system", root)
	}
	r.Notes = append(r.Notes,
		"host sysctls are left alone: machines see the values kubelet wants (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1) through read-only files bound over /proc/sys inside each machine",
		hostChanges(opts.EgressNAT))
	if len(r.Problems) > 0 {
		return r, &PreflightError{Problems: r.Problems}
	}
	return r, nil
}

// checkDNSPort checks that nothing holds port 53 of every IPv4 address
// (0.0.0.0:53, TCP or UDP: dnsmasq's default, without bind-interfaces),
// which the API load balancer's DNS forwarder, the machines' resolver
// with egress NAT, could then not take on the bridge address. A server on
// addresses of its own (systemd-resolved's 127.0.0.53, a bridge's) is
// no problem; an IPv6 wildcard is not judged, as /proc does not tell
// whether it takes IPv4 too. Unreadable tables are skipped.
func checkDNSPort(problem func(string, string, ...any), p hostProbe) {
	var held []string
	for _, t := range []struct{ file, state, proto string }{{"/proc/net/tcp", "0A", "TCP"}, {"/proc/net/udp", "07", "UDP"}} {
		data, err := p.read(t.file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && f[1] == "00000000:0035" && f[3] == t.state {
				held = append(held, t.proto)
				break
			}
		}
	}
	if len(held) > 0 {
		problem(CheckDNSPort, "a server listens on port 53 of every address (0.0.0.0:53, %s), so the DNS forwarder that networking.egress NAT gives the machines cannot listen on the bridge address: "+
			"have that server listen on its own addresses only (dnsmasq: bind-interfaces or bind-dynamic), or set networking.egress: None", strings.Join(held, " and "))
	}
}

// hostChanges is the note that lists what the cluster changes on the host.
func hostChanges(egressNAT bool) string {
	const common = "host changes while machines exist: one bridge with an unreachable route holding its network (so nothing for it leaves through another route once the bridge is gone), one veth, one overlay mount and one cgroup per hierarchy per machine; "
	if egressNAT {
		return common + "for networking.egress NAT, an nftables table " + EgressTable("<bridge>") + " masquerading the machine network out of the host's other interfaces, and net.ipv4.conf.<if>.forwarding=1 on the bridge and on the interfaces of the host's default routes (their values before are recorded in " + DefaultEgressRecordDir + "/" + EgressRecordFile + "; net.ipv4.ip_forward is left alone); no other routes; all removed on destroy"
	}
	return common + "no other routes, no NAT or forwarding (networking.egress None); all removed on destroy"
}

// kernelModules is what the host's kernel offers as modules: those loaded,
// built in and loadable, from /proc/modules and
// /lib/modules/<release>/modules.{builtin,dep}. known is false when the
// lists cannot be read (a kernel without modules, or a container): then
// only what is loaded or shows in /sys is known.
type kernelModules struct {
	loaded, builtin, loadable map[string]bool
	known                     bool
}

func readModules(p hostProbe) kernelModules {
	m := kernelModules{loaded: map[string]bool{}, builtin: map[string]bool{}, loadable: map[string]bool{}}
	if data, err := p.read("/proc/modules"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				m.loaded[f[0]] = true
			}
		}
	}
	rel, _ := p.read("/proc/sys/kernel/osrelease")
	dir := filepath.Join("/lib/modules", strings.TrimSpace(string(rel)))
	names := func(file string, into map[string]bool) bool {
		data, err := p.read(filepath.Join(dir, file))
		for _, line := range strings.Split(string(data), "\n") {
			path, _, _ := strings.Cut(line, ":")
			base := filepath.Base(path)
			if i := strings.Index(base, ".ko"); i > 0 {
				into[strings.ReplaceAll(base[:i], "-", "_")] = true
			}
		}
		return err == nil
	}
	builtin := names("modules.builtin", m.builtin)
	loadable := names("modules.dep", m.loadable)
	m.known = builtin && loadable
	return m
}

// has reports whether the kernel has the module (loaded, built in or
// loadable) and whether that is known.
func (m kernelModules) has(name string, p hostProbe) (has, known bool) {
	if m.loaded[name] || m.builtin[name] || m.loadable[name] || p.exists("/sys/module/"+name) {
		return true, true
	}
	return false, m.known
}

// checkKernel checks for what machines need from the kernel: overlayfs
// (their roots), bridge and veth (their network), ip_set and xt_set
// (kube-router's NetworkPolicy rules), all loaded on demand,
// and br_netfilter, which nothing loads by itself but without which
// Service traffic between pods on one node bypasses kube-proxy's rules.
func checkKernel(problem func(string, string, ...any), p hostProbe) {
	mods := readModules(p)
	fss, _ := p.read("/proc/filesystems")
	if !strings.Contains(string(fss), "\toverlay\n") {
		if has, known := mods.has("overlay", p); !has && known {
			problem(CheckKernel+":overlay", "the kernel has no overlayfs (machine roots are copy-on-write overlays): use a kernel built with CONFIG_OVERLAY_FS")
		}
	}
	for _, k := range []struct{ mod, config, why string }{
		{"bridge", "CONFIG_BRIDGE", "the machines' network is a bridge"},
		{"veth", "CONFIG_VETH", "each machine is on the bridge through a veth pair"},
		{"ip_set", "CONFIG_IP_SET", "NetworkPolicies are enforced with ipsets"},
		{"xt_set", "CONFIG_NETFILTER_XT_SET", "NetworkPolicy rules match ipsets"},
	} {
		if has, known := mods.has(k.mod, p); !has && known {
			problem(CheckKernel+":"+k.mod, "the kernel has no %s (%s): use a kernel built with %s", k.mod, k.why, k.config)
		}
	}
	if p.exists("/proc/sys/net/bridge") {
		return
	}
	if has, known := mods.has("br_netfilter", p); !has && known {
		problem(CheckKernel+":br_netfilter", "the kernel has no br_netfilter (kube-proxy's rules must see bridged pod traffic): use a kernel built with CONFIG_BRIDGE_NETFILTER")
		return
	}
	problem(CheckKernel+":br_netfilter", "br_netfilter is not loaded (kube-proxy's rules must see bridged pod traffic): run `modprobe br_netfilter` "+
		"(persist it: echo br_netfilter > /etc/modules-load.d/kiln.conf)")
}

// checkCgroups says in which mode machines run; a host without systemd and
// without memory and cpu controllers cannot run kubelet in a machine.
func checkCgroups(r *Report, problem func(string, string, ...any), p hostProbe) {
	layout, err := detectCgroups(p.root)
	if err != nil {
		problem(CheckCgroups, "%v", err)
		return
	}
	r.Mode = layout.Mode()
	r.LimitsEnforced = r.Mode.Enforced()
	r.Notes = append(r.Notes, "cgroup mode "+string(r.Mode)+": "+r.Mode.Describe())
	if !r.LimitsEnforced {
		problem(CheckCgroups, "PID 1 is not systemd and the host has no usable memory and cpu cgroup controllers "+
			"(kubelet in each machine needs them): boot with systemd as init (Debian's default), or mount cgroup2 "+
			"at /sys/fs/cgroup with the memory and cpu controllers (`mount -t cgroup2 none /sys/fs/cgroup`)")
		return
	}
	if layout.ForcesV1() {
		r.Warnings = append(r.Warnings, "this host's cgroups are v1 or hybrid, so the machines get cgroup v1, which Kubernetes deprecated: "+
			"kubelet runs with failCgroupV1: false. A host booted with the unified hierarchy (cgroup v2, the default of "+
			"Debian 12, Ubuntu 22.04 and Fedora; kernel option systemd.unified_cgroup_hierarchy=1) gives them cgroup v2")
	}
}

// checkMemory checks that the machines fit in the host's available memory
// and warns when their limits add up to more than the host has.
func checkMemory(r *Report, problem func(string, string, ...any), opts PreflightOptions, p hostProbe) {
	data, err := p.read("/proc/meminfo")
	if err != nil {
		r.Warnings = append(r.Warnings, "cannot read /proc/meminfo: "+err.Error())
		return
	}
	total, available := meminfo(string(data), "MemTotal"), meminfo(string(data), "MemAvailable")
	if need := int64(opts.Machines) * MinMachineMemory; available >= 0 && available < need {
		problem(CheckMemory, "the host has %d MiB of memory available and %d machines need at least %d MiB (%d MiB each): "+
			"free memory (stop other clusters: kiln stop cluster) or create fewer machines",
			available>>20, opts.Machines, need>>20, MinMachineMemory>>20)
	}
	var sum int64
	for _, l := range opts.MemoryLimits {
		sum += l
	}
	if total > 0 && sum > total {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the machines' memory limits add up to %d MiB, more than the host's %d MiB: "+
			"under load the kernel may kill their processes; lower platform.local memoryMiB in install-config.yaml", sum>>20, total>>20))
	}
}

// checkEmulatedCPU warns when the host's CPUs are emulated (qemu's TCG:
// 10-20 times slower than the host under it) and the control plane runs on
// etcd's standard timing: there two etcd members elected leaders without
// end during bootstrapping (docs/benchmarks.md, "The host test").
func checkEmulatedCPU(r *Report, opts PreflightOptions, p hostProbe) {
	data, err := p.read("/proc/cpuinfo")
	if err != nil || opts.SlowerControlPlane {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		key, model, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "model name" || !strings.Contains(model, "QEMU TCG") {
			continue
		}
		r.Warnings = append(r.Warnings, "this host's CPUs are emulated ("+strings.TrimSpace(model)+"), many times slower than real ones: "+
			"with etcd's standard timing the control plane may lose its etcd leader again and again and never finish bootstrapping; "+
			"set controlPlaneHardwareSpeed: Slower in install-config.yaml")
		return
	}
}

// meminfo returns the value of key in /proc/meminfo in bytes; -1 when absent.
func meminfo(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		return n
	}
	return -1
}

// nspawnEnv are the SYSTEMD_NSPAWN_* variables that would change how
// machines are set up, with what they would do.
var nspawnEnv = []struct{ name, effect string }{
	{"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY", "chooses the machines' cgroup layout, which kiln takes from the host's (a cgroup2 without controllers cannot run kubelet)"},
	{"SYSTEMD_NSPAWN_USE_CGNS", "turns off the machines' cgroup namespace, which containerd and kubelet in the machines need"},
	{"SYSTEMD_NSPAWN_API_VFS_WRITABLE", "makes /proc/sys and /sys writable in the machines, so they could change the host's settings"},
	{"SYSTEMD_NSPAWN_SHARE_NS_IPC", "shares the host's IPC namespace with the machines"},
	{"SYSTEMD_NSPAWN_SHARE_NS_PID", "shares the host's PID namespace with the machines"},
	{"SYSTEMD_NSPAWN_SHARE_NS_UTS", "shares the host's host name with the machines"},
	{"SYSTEMD_NSPAWN_SHARE_SYSTEM", "shares the host's IPC, PID and UTS namespaces with the machines"},
}

// checkEnv refuses an environment that would change systemd-nspawn's setup
// of the machines.
func checkEnv(problem func(string, string, ...any), p hostProbe) {
	set := map[string]string{}
	for _, kv := range p.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			set[k] = v
		}
	}
	for _, e := range nspawnEnv {
		if v, ok := set[e.name]; ok {
			problem(CheckEnv+":"+e.name, "%s=%s is set in kiln's environment: it %s; unset it (unset %s)", e.name, v, e.effect, e.name)
		}
	}
}

// checkInotify checks that root's inotify instance limit leaves room for
// the machines.
func checkInotify(r *Report, problem func(string, string, ...any), machines int, p hostProbe) {
	data, err := p.read("/proc/sys/fs/inotify/max_user_instances")
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
		problem(CheckInotify,
			"fs.inotify.max_user_instances is %d, %d are in use and %d machines need about %d more (%d each): "+
				"run `sysctl -w fs.inotify.max_user_instances=%d` (persist it in /etc/sysctl.d/90-kiln.conf)",
			max, used, machines, machines*InotifyInstancesPerMachine, InotifyInstancesPerMachine, want)
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
