package preflight

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Role is what a host becomes in the cluster.
type Role string

// The roles of the hosts.
const (
	Bootstrap Role = "bootstrap"
	Master    Role = "master"
	Worker    Role = "worker"
)

// Host is one host to check.
type Host struct {
	// Name is the host's name in install-config.yaml.
	Name string
	// Address is where kiln reaches it.
	Address string
	// Role is what it becomes.
	Role Role
	// Speaker says that its node runs MetalLB's speaker (for
	// platform.ssh.loadBalancerIPs or the API VIP that kiln keeps), whose
	// ports it must have free too (SpeakerPorts).
	Speaker bool
	// TimeServers says that kiln gives the host's NTP client the time
	// servers of platform.ssh.ntpServers, which one of TimeClients must
	// take.
	TimeServers bool
}

// TimeClients are the NTP clients (their units' names) kiln can give
// platform.ssh.ntpServers, the first a host has installed taking them:
// chrony (chronyd on some distributions) through a file in
// ChronySourcesDir, systemd-timesyncd through a drop-in.
func TimeClients() []string { return []string{"chrony", "chronyd", "systemd-timesyncd"} }

// ChronySourcesDir is the sourcedir of chrony's that kiln puts the time
// servers in; Debian's chrony.conf reads it.
const ChronySourcesDir = "/etc/chrony/sources.d"

// String names the host in messages.
func (h Host) String() string { return h.Name + " (" + h.Address + ")" }

// Observation is what running Script on a host gave.
type Observation struct {
	// Facts are what the host reported, when Err is nil.
	Facts Facts
	// Before and After are this machine's clock just before kiln ran the
	// script and just after it returned: the host's Clock, if in step,
	// falls between them.
	Before, After time.Time
	// Err is why the script did not run or its output was unreadable.
	Err error
}

// Requirements kiln has of every host.
const (
	// MinSystemd is the oldest systemd kiln's units and the payload's
	// system extension need (Debian 12 has 252).
	MinSystemd = 252
	// MaxClockSkew is how far a host's clock may be from this machine's,
	// which signs the cluster's certificates: etcd warns at 1 s, and
	// certificates valid from a later second are refused by a host behind.
	MaxClockSkew = time.Second
	// MinMasterMemory is the memory of a bootstrap host or master: the
	// control plane and etcd use about 500 MiB once installed
	// (docs/benchmarks.md), with room for the pods kiln installs.
	MinMasterMemory = 2 << 30
	// MinWorkerMemory is the memory of a worker.
	MinWorkerMemory = 1 << 30
	// MinVarFree is the free space under /var: the payload and its
	// images, containerd's content store and etcd's data.
	MinVarFree = 8 << 30
)

// supportedOS are the ID/VERSION_ID pairs of os-release kiln installs onto.
var supportedOS = [...]string{"debian/12"}

// modules are the kernel modules every host needs, with why.
var modules = [...]struct{ name, why string }{
	{"overlay", "containerd's overlayfs snapshotter"},
	{"bridge", "the pod network's bridge"},
	{"veth", "each pod joins the bridge through a veth pair"},
	{"br_netfilter", "kube-proxy's rules must see bridged pod traffic"},
	{"nf_conntrack", "kube-proxy's NAT"},
	{"ip_set", "NetworkPolicies are enforced with ipsets"},
	{"xt_set", "NetworkPolicy rules match ipsets"},
}

// ModuleNames are the names of the kernel modules every host needs, in
// the order the preflight checks them.
func ModuleNames() []string {
	names := make([]string, len(modules))
	for i, m := range modules {
		names[i] = m.name
	}
	return names
}

// requiredTools are the programs kiln needs from the host's own packages.
var requiredTools = [...]struct{ name, pkg, why string }{
	{"iptables", "iptables", "the CNI portmap plugin programs hostPort rules with it"},
}

// Ports are the TCP ports a role's components listen on, with who.
func Ports(r Role) map[int]string {
	p := map[int]string{
		10248: "kubelet's health", 10249: "kube-proxy's metrics", 10250: "kubelet",
		10256: "kube-proxy's health", 20244: "the NetworkPolicy engine's health",
		6444: "kiln's API proxy", 22624: "kiln's API proxy",
	}
	if r == Bootstrap || r == Master {
		for port, who := range map[int]string{
			2379: "etcd", 2380: "etcd's peers", 2381: "etcd's metrics", 6443: "kube-apiserver",
			10257: "kube-controller-manager", 10259: "kube-scheduler", 22623: "the machine-config server",
		} {
			p[port] = who
		}
	}
	return p
}

// SpeakerPorts are the TCP ports MetalLB's speaker listens on in the
// host's network, with who. (Its memberlist also takes UDP 7946, which
// the preflight does not see.)
func SpeakerPorts() map[int]string {
	return map[int]string{7472: "the LoadBalancer speaker's metrics (loopback)", 7946: "the LoadBalancer speakers' memberlist"}
}

// Problem is one thing a host lacks.
type Problem struct {
	// Host is the host, in install-config.yaml's order.
	Host Host
	// Check names what is checked: os, root, systemd, cgroups, kernel,
	// package, clash, payload, port, clock, hostname, machine-id, memory,
	// disk or reach.
	Check string
	// Message says what is wrong and how to fix it.
	Message string
}

// Error lists every problem of every host.
type Error struct {
	// Problems are the problems, grouped by host in install-config order.
	Problems []Problem
}

// Error lists the problems under each host.
func (e *Error) Error() string {
	var b strings.Builder
	hosts := 0
	for i, p := range e.Problems {
		if i == 0 || p.Host != e.Problems[i-1].Host {
			hosts++
		}
	}
	fmt.Fprintf(&b, "preflight: %d of the hosts cannot run the cluster:", hosts)
	for i, p := range e.Problems {
		if i == 0 || p.Host != e.Problems[i-1].Host {
			fmt.Fprintf(&b, "\n  %s:", p.Host)
		}
		fmt.Fprintf(&b, "\n    - %s: %s", p.Check, p.Message)
	}
	return b.String()
}

// Check judges the observations of hosts (obs[i] is hosts[i]'s), whose
// machine-ids must differ from one another's and from installed's (the
// machine-ids of the cluster's hosts installed already): it returns
// warnings worth telling and an *Error with every problem of every host,
// nil when there is none.
func Check(hosts []Host, obs []Observation, installed map[Host]string) (warnings []string, err error) {
	var probs []Problem
	for i, h := range hosts {
		problem := func(check, format string, args ...any) {
			probs = append(probs, Problem{Host: h, Check: check, Message: fmt.Sprintf(format, args...)})
		}
		warn := func(format string, args ...any) {
			warnings = append(warnings, h.String()+": "+fmt.Sprintf(format, args...))
		}
		o := obs[i]
		if o.Err != nil {
			problem("reach", "%v", o.Err)
			continue
		}
		checkHost(h, o, problem, warn)
	}
	probs = append(probs, unique(hosts, obs, "hostname", func(f Facts) string { return f.Hostname },
		"every node's name is its hostname: set a unique one (hostnamectl set-hostname)")...)
	probs = append(probs, unique(hosts, obs, "machine-id", func(f Facts) string { return f.MachineID },
		machineIDFix)...)
	for i, h := range hosts {
		var same []string
		for other, id := range installed {
			if obs[i].Err == nil && id == obs[i].Facts.MachineID && other != h {
				same = append(same, other.Name)
			}
		}
		if len(same) > 0 {
			slices.Sort(same)
			probs = append(probs, Problem{Host: h, Check: "machine-id", Message: fmt.Sprintf("machine-id %q is also that of %s, in the cluster already: %s",
				obs[i].Facts.MachineID, strings.Join(same, ", "), machineIDFix)})
		}
	}
	if len(probs) == 0 {
		return warnings, nil
	}
	order := make(map[Host]int, len(hosts))
	for i, h := range hosts {
		order[h] = i
	}
	slices.SortStableFunc(probs, func(a, b Problem) int { return order[a.Host] - order[b.Host] })
	return warnings, &Error{Problems: probs}
}

// checkHost judges one host's facts.
func checkHost(h Host, o Observation, problem func(check, format string, args ...any), warn func(format string, args ...any)) {
	f := o.Facts
	if !slices.Contains(supportedOS[:], f.OSID+"/"+f.OSVersion) {
		name := f.OSName
		if name == "" {
			name = "an OS without /etc/os-release"
		}
		problem("os", "the host runs %s; kiln installs onto Debian 12 (bookworm)", name)
	}
	if f.Hostname != "" && f.Hostname != h.Name {
		problem("name", "the host's hostname is %q, not %q: its Node is named after its hostname, which kiln leaves as it is; name it %q in platform.ssh.hosts", f.Hostname, h.Name, f.Hostname)
	}
	if f.UID != 0 {
		problem("root", "the preflight ran as uid %d: kiln needs root on the host (log in as root, or as a user sudo lets run anything without a password)", f.UID)
	}
	switch {
	case f.PID1 != "systemd":
		problem("systemd", "PID 1 is %q, not systemd: kiln runs its components as systemd units", f.PID1)
	case f.Systemd < MinSystemd:
		problem("systemd", "systemd %d is older than %d, which kiln's units and system extension need", f.Systemd, MinSystemd)
	}
	switch {
	case f.CgroupFS == "cgroup2fs":
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !slices.Contains(f.CgroupControllers, c) {
				problem("cgroups", "cgroup v2 lacks the %s controller, which kubelet needs", c)
			}
		}
	case f.PID1 == "systemd":
		warn("its cgroups are v1 or hybrid (%s at /sys/fs/cgroup), which Kubernetes deprecated: kubelet runs with failCgroupV1: false. "+
			"Booting with systemd.unified_cgroup_hierarchy=1 (Debian 12's default) gives cgroup v2", orUnknown(f.CgroupFS))
	}
	checkKernel(f, problem)
	for _, tool := range requiredTools {
		if !f.Tools[tool.name] {
			problem("package", "%s is missing (%s): apt-get install %s", tool.name, tool.why, tool.pkg)
		}
	}
	for _, c := range f.Clashes {
		problem("clash", "%s is there already: kiln brings its own container runtime and kubelet, which would clash with it; remove it, or choose another host", c)
	}
	for _, p := range f.Payloads {
		problem("payload", "the host carries kiln's payload already (%s): it belongs to a cluster; destroy that cluster first", p)
	}
	ports := Ports(h.Role)
	if h.Speaker {
		maps.Copy(ports, SpeakerPorts())
	}
	var busy []int
	for port := range ports {
		if f.Listening[port] {
			busy = append(busy, port)
		}
	}
	slices.Sort(busy)
	for _, port := range busy {
		problem("port", "something listens on TCP port %d, kept for %s", port, ports[port])
	}
	checkClock(o, problem)
	checkTime(h, f, problem)
	if len(f.NTP) == 0 && !h.TimeServers {
		warn("no NTP client runs (systemd-timesyncd, chrony, ntpsec or openntpd): its clock is in step now, but will drift from the others' (apt-get install systemd-timesyncd)")
	}
	if f.Swap > 0 {
		warn("swap is on (%d areas); kubelet runs with failSwapOn: false and gives pods no swap, but a node that swaps is slow: swapoff -a and remove swap from /etc/fstab", f.Swap)
	}
	minMem := int64(MinWorkerMemory)
	if h.Role != Worker {
		minMem = MinMasterMemory
	}
	if f.Memory >= 0 && f.Memory < minMem {
		problem("memory", "the host has %d MiB of memory; a %s needs at least %d MiB", f.Memory>>20, h.Role, minMem>>20)
	}
	if f.VarFree >= 0 && f.VarFree < MinVarFree {
		problem("disk", "/var has %d MiB free; kiln needs %d MiB for the payload, its images, containerd's content and etcd", f.VarFree>>20, int64(MinVarFree)>>20)
	}
}

// checkKernel checks the kernel modules: loaded, built in or loadable
// (kiln loads them at boot); when the host's module lists cannot be read,
// only what shows as loaded is known, and nothing is claimed missing.
func checkKernel(f Facts, problem func(check, format string, args ...any)) {
	if !f.OverlayFS && f.Modules["overlay"] == "missing" {
		problem("kernel", "the kernel %s has no overlayfs (%s)", f.Kernel, modules[0].why)
	}
	for _, m := range modules[1:] {
		if m.name == "br_netfilter" && f.BridgeNetfilter {
			continue
		}
		if f.Modules[m.name] == "missing" {
			problem("kernel", "the kernel %s has no %s module (%s)", f.Kernel, m.name, m.why)
		}
	}
}

// checkTime checks that a host given time servers has an NTP client kiln
// can give them to.
func checkTime(h Host, f Facts, problem func(check, format string, args ...any)) {
	if !h.TimeServers {
		return
	}
	switch {
	case len(f.TimeClients) == 0:
		problem("ntp", "platform.ssh.ntpServers is set, but none of %s is installed: kiln gives the time servers to one of them (apt-get install chrony)", strings.Join(TimeClients(), ", "))
	case f.TimeClients[0] != "systemd-timesyncd" && !slices.Contains(f.ChronySourceDirs, ChronySourcesDir):
		problem("ntp", "platform.ssh.ntpServers is set, but %s reads no %s, where kiln puts the time servers: add \"sourcedir %s\" to its chrony.conf", f.TimeClients[0], ChronySourcesDir, ChronySourcesDir)
	}
}

// checkClock compares the host's clock with the window in which this
// machine ran the script.
func checkClock(o Observation, problem func(check, format string, args ...any)) {
	c := o.Facts.Clock
	switch {
	case c.Before(o.Before.Add(-MaxClockSkew)):
		problem("clock", "its clock is %s behind this machine's (at most %s): the certificates kiln signs would not be valid yet there; synchronize it (systemd-timesyncd or chrony)",
			o.Before.Sub(c).Round(time.Millisecond), MaxClockSkew)
	case c.After(o.After.Add(MaxClockSkew)):
		problem("clock", "its clock is %s ahead of this machine's (at most %s): etcd and certificate lifetimes need clocks in step; synchronize it (systemd-timesyncd or chrony)",
			c.Sub(o.After).Round(time.Millisecond), MaxClockSkew)
	}
}

// machineIDFix says how to give a cloned host a machine-id of its own.
const machineIDFix = "hosts cloned from one image share it: run rm /etc/machine-id && systemd-machine-id-setup on the copies"

// unique reports hosts whose key (a hostname, a machine-id) another host
// has too, each naming the others.
func unique(hosts []Host, obs []Observation, check string, key func(Facts) string, fix string) []Problem {
	by := map[string][]Host{}
	for i, h := range hosts {
		if obs[i].Err != nil {
			continue
		}
		if k := key(obs[i].Facts); k != "" {
			by[k] = append(by[k], h)
		}
	}
	var probs []Problem
	for i, h := range hosts {
		if obs[i].Err != nil {
			continue
		}
		k := key(obs[i].Facts)
		same := by[k]
		if k == "" {
			probs = append(probs, Problem{Host: h, Check: check, Message: "the host has no " + check + ": " + fix})
			continue
		}
		if len(same) < 2 {
			continue
		}
		var others []string
		for _, o := range same {
			if o != h {
				others = append(others, o.Name)
			}
		}
		probs = append(probs, Problem{Host: h, Check: check, Message: fmt.Sprintf("%s %q is also %s's: %s", check, k, strings.Join(others, ", "), fix)})
	}
	return probs
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
