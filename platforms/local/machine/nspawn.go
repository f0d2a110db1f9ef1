package machine

import (
	"path"
	"slices"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// sysctlShimDir holds, inside the machine's root, the files bound over
// /proc/sys. nspawn resolves the source of a bind whose target is under
// /proc inside the machine's root, so they must live there.
const sysctlShimDir = "/etc/kiln/sysctl"

// hostBinds are the plain host directories bound into every machine, as
// paths inside the machine: containerd's overlayfs snapshotter cannot put
// its upper directories on the machine's overlayfs root.
var hostBinds = []string{"/var/lib/containerd", "/var/lib/kubelet"}

// bindTargets are the plain host directories bound into the machine of s:
// hostBinds, and on a node of kiln's (a machine with an Ignition config)
// nodelayout.ReleasesDir, where an upgrade stages release payloads
// (StageTree: hard links to a node image's files, made from the host while
// the machine runs). A machine that stands for a user's host gets no such
// mount: it has what a server has.
func bindTargets(s *Spec) []string {
	if s.Ignition == nil {
		return hostBinds
	}
	return append(slices.Clone(hostBinds), nodelayout.ReleasesDir)
}

// hostBindDir is the directory under the machine's state directory backing
// the bind of target.
func hostBindDir(target string) string { return "bind-" + path.Base(target) }

// nspawnArgs is what the nspawn command line is built from.
type nspawnArgs struct {
	Name    string
	Root    string // the mounted overlay
	Bridge  string
	Binds   []Bind // host directory binds then Spec.Binds
	Sysctls bool   // bind the kubelet sysctl shims
}

// nspawnArgv builds the systemd-nspawn command line that boots a machine.
func nspawnArgv(a nspawnArgs) []string {
	argv := []string{
		"systemd-nspawn",
		"--quiet",
		"--boot",
		"--directory=" + a.Root,
		"--machine=" + a.Name,
		// PID 1 is not always systemd: no machined registration, and the
		// machine stays in the cgroup it is started from.
		"--register=no",
		"--keep-unit",
		// A private network is required: without one nspawn drops
		// CAP_NET_ADMIN and the node would change the host's network.
		"--network-bridge=" + a.Bridge,
		// runc needs a session keyring and BPF for the cgroup device filter.
		"--system-call-filter=@keyring bpf",
		// kubelet opens /dev/kmsg; the host has dmesg_restrict.
		"--bind-ro=/dev/kmsg",
		"--capability=CAP_SYSLOG",
		"--private-users=no",
		"--resolv-conf=off",
		"--timezone=off",
		"--link-journal=no",
		"--console=read-only",
	}
	for _, b := range a.Binds {
		flag := "--bind="
		if b.ReadOnly {
			flag = "--bind-ro="
		}
		argv = append(argv, flag+b.Source+":"+b.Target)
	}
	if a.Sysctls {
		// kubelet's sysctls (nodelayout.KubeletSysctls): /proc/sys is
		// read-only in a machine, so kubelet would try to set them and
		// fail. Instead of changing the host, each machine sees files with
		// these values bound read-only over the /proc/sys entries: kubelet
		// reads the wanted value and leaves it be.
		for _, s := range nodelayout.KubeletSysctls() {
			argv = append(argv, "--bind-ro="+path.Join(sysctlShimDir, s.Key)+":"+path.Join("/proc/sys", s.Key))
		}
	}
	return argv
}

// nsenterArgv runs argv inside the machine whose PID 1 is leader, with a
// clean environment.
func nsenterArgv(leader int, argv []string) []string {
	out := []string{"nsenter", "--target", itoa(leader),
		"--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--",
		"/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	return append(out, argv...)
}
