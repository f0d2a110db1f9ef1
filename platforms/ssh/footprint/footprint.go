// Package footprint is what kiln changes on a host it installs onto over
// SSH, and how it takes all of it away again: the hosts are the user's and
// outlive the cluster.
//
// Before it changes anything, the install script records on the host what
// the host had (RecordDir): which of the paths kiln will write existed (a
// copy of each that did), which did not (removed again on reset, with the
// topmost missing directory), the network interfaces, nftables tables,
// iptables rules and chains, routes and sysctls, and whether
// systemd-sysext.service was enabled. Then it merges the node payload,
// writes the machine's Ignition config and node environment, and starts
// kiln-ignition.service, which applies the config as on a local machine.
// The reset script needs nothing but that record: it stops the units and
// every pod, unmounts what they mounted, removes what was not there,
// restores what was, deletes the interfaces, tables, chains and routes the
// cluster made, puts the sysctls back, unmerges the payload and removes the
// record last, so an interrupted reset runs again.
//
// Between the two, Stop stops the node on a host (its units, disabled so
// that a reboot keeps it stopped, and every pod) and keeps everything
// else; Start starts it again.
package footprint

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// RecordDir is where the install script keeps a host's record, and with it
// the copies of the files kiln replaced.
const RecordDir = "/var/lib/kiln-host"

// ModulesLoadFile names the kernel modules a node needs
// (preflight.ModuleNames) for the host's next boot; reset removes it but
// leaves the modules loaded (unloading one the host may use meanwhile is
// not kiln's to do).
const ModulesLoadFile = "/etc/modules-load.d/kiln.conf"

// Footprint is what one Ignition config, applied by kiln, writes on a
// host, beside what every node writes (StatePaths).
type Footprint struct {
	// Paths are the files, links and directories the config writes, the
	// unit files and drop-ins included, sorted.
	Paths []string
	// Units are the systemd units the config writes or enables, sorted.
	Units []string
}

// StatePaths are what every node writes besides its Ignition config: its
// kiln directory, Ignition's own state and results (and the SELinux
// stub it runs with, gone unless its run was cut), the container
// runtime's, kubelet's, etcd's and the pod network's data, the pods' logs,
// and the units' runtime files.
var StatePaths = []string{
	// kiln's own directory: the node environment, the additional trust
	// bundle, and on masters the machine-config server's files, which a
	// master's config (a pointer) does not name.
	nodelayout.KilnConfigDir,
	"/etc/.ignition-result.json",
	"/etc/cni",
	"/etc/kubernetes",
	ModulesLoadFile,
	"/etc/selinux/config",
	"/etc/systemd/system-preset/20-ignition.preset",
	"/opt/cni",
	"/opt/kiln",
	"/run/containerd",
	"/run/kiln",
	"/var/lib/cni",
	"/var/lib/containerd",
	"/var/lib/etcd",
	"/var/lib/kiln",
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
}

// The host's proxy to the API and machine-config servers: `kiln lb` from
// the payload, listening on the host's loopback interface, which every
// component of the node reaches the cluster through
// (types.Config.NodeProxy). Its unit and configuration are kiln's
// files on the host, recorded and removed like the rest.
const (
	// APIProxyUnit is the proxy's unit.
	APIProxyUnit = "kiln-api-proxy.service"
	// APIProxyUnitFile is where apply writes it.
	APIProxyUnitFile = "/etc/systemd/system/" + APIProxyUnit
	// APIProxyConfigFile is the proxy's configuration.
	APIProxyConfigFile = nodelayout.KilnConfigDir + "/api-proxy/lb.json"
	// apiProxyStateDir is the proxy's --dir: its debug log.
	apiProxyStateDir = "/var/lib/kiln/api-proxy"
)

// apiProxyUnitText is the proxy's unit: started before
// kiln-ignition.service, whose first fetch (a pointer config's) goes
// through it, and restarted whenever it stops.
func apiProxyUnitText() string {
	return `[Unit]
Description=kiln: this host's proxy to its cluster's API and machine-config servers
Before=kiln-ignition.service kubelet.service

[Service]
StateDirectory=kiln/api-proxy
ExecStart=` + nodelayout.KilnBinary + ` --dir ` + apiProxyStateDir + ` lb --config ` + APIProxyConfigFile + `
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
`
}

// PayloadUnits are the units of the node payload that kiln enables itself;
// the Ignition config enables the rest.
var PayloadUnits = []string{"containerd.service", "kiln-cgroup-rw.service", "kiln-images.service", "kiln-ignition.service"}

// Sysctls are the kernel settings a node may change, by their paths below
// /proc/sys: the pod network's, kube-proxy's, and kubelet's
// (nodelayout.KubeletSysctls); the record keeps their values and reset
// puts them back.
func Sysctls() []string {
	keys := []string{
		"net/bridge/bridge-nf-call-ip6tables",
		"net/bridge/bridge-nf-call-iptables",
		"net/ipv4/conf/all/route_localnet",
		"net/ipv4/ip_forward",
		"net/ipv6/conf/all/forwarding",
		"net/netfilter/nf_conntrack_max",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
		"net/netfilter/nf_conntrack_tcp_timeout_established",
	}
	for _, s := range nodelayout.KubeletSysctls() {
		keys = append(keys, s.Key)
	}
	return keys
}

// FromIgnition returns what config writes on a host. A config that would
// change the host's users, groups, disks or filesystems is refused: those
// are the owner's, and reset could not give them back.
func FromIgnition(config []byte) (Footprint, error) {
	c, err := ignition.Parse(config)
	if err != nil {
		return Footprint{}, err
	}
	var refused []string
	if len(c.Passwd.Users) > 0 || len(c.Passwd.Groups) > 0 {
		refused = append(refused, "users or groups (passwd)")
	}
	s := c.Storage
	if len(s.Disks) > 0 || len(s.Filesystems) > 0 || len(s.Raid) > 0 || len(s.Luks) > 0 {
		refused = append(refused, "disks, filesystems, RAID or LUKS (storage)")
	}
	if len(c.KernelArguments.ShouldExist) > 0 || len(c.KernelArguments.ShouldNotExist) > 0 {
		refused = append(refused, "kernel arguments")
	}
	if len(refused) > 0 {
		return Footprint{}, fmt.Errorf("the Ignition config changes a host's %s, which belong to the host's owner: kiln could not undo it on destroy", strings.Join(refused, " and "))
	}
	paths := map[string]bool{}
	units := map[string]bool{}
	for _, f := range s.Files {
		paths[f.Path] = true
	}
	for _, l := range s.Links {
		paths[l.Path] = true
	}
	for _, d := range s.Directories {
		paths[d.Path] = true
	}
	for _, u := range c.Systemd.Units {
		units[u.Name] = true
		if u.Contents != nil {
			paths[path.Join("/etc/systemd/system", u.Name)] = true
		}
		for _, d := range u.Dropins {
			paths[path.Join("/etc/systemd/system", u.Name+".d", d.Name)] = true
		}
	}
	return Footprint{Paths: sorted(paths), Units: sorted(units)}, nil
}

func sorted(set map[string]bool) []string {
	return slices.Sorted(maps.Keys(set))
}
