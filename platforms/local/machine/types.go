package machine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kiln-project/kiln/platforms"
)

// Bind is an extra bind mount from the host into a machine.
type Bind struct {
	// Source is an absolute host path.
	Source string
	// Target is an absolute path inside the machine.
	Target string
	// ReadOnly makes the mount read-only.
	ReadOnly bool
}

// HostEntry is one line of a machine's /etc/hosts.
type HostEntry struct {
	// IP is the address the names resolve to.
	IP string
	// Names are the host names for IP.
	Names []string
}

// Spec describes one machine.
type Spec struct {
	// Name is the unique machine name and its hostname, e.g. "demo-x7k2p-master-0".
	Name string
	// Image is the node image rootfs directory; it is the read-only lower
	// layer of the machine's root and is never modified.
	Image string
	// Bridge is the host bridge the machine's veth is attached to.
	Bridge string
	// Address is the machine address with prefix, e.g. "10.66.0.11/24".
	Address string
	// Hosts are written to the machine's /etc/hosts.
	Hosts []HostEntry
	// Routes are IPv4 destinations, e.g. the cluster's service network
	// "172.30.0.0/16", routed on-link through the machine's interface: a
	// connect from the machine's own network namespace to such an address
	// then has a route (and a source address), so kube-proxy's DNAT in nat
	// OUTPUT can apply. A packet nothing rewrites stays on the bridge, where
	// nobody answers for it. Never a default route (Gateway is that).
	// Omitted from the spec's hash when empty, so machines created without
	// routes keep their hash.
	Routes []string `json:",omitempty"`
	// Gateway is the host's address on the bridge when the machine has a
	// default route through it (networking.egress NAT: the host
	// masquerades the machine network, Egress) and its resolver there (the
	// host forwards DNS); empty, the machine reaches the bridge only and
	// has no resolver. Omitted from the spec's hash when empty.
	Gateway string `json:",omitempty"`
	// Ignition is written to /var/lib/kiln/ignition/config.ign (0600) before
	// the first boot; nil writes nothing (a machine that stands for a
	// user's host in tests).
	Ignition []byte
	// Env is written to /etc/kiln/node.env as KEY=value lines; nil writes
	// nothing.
	Env map[string]string
	// CPUs is the CPU quota in cores; 0 means unlimited.
	CPUs float64
	// MemoryBytes is the memory limit; 0 means unlimited.
	MemoryBytes int64
	// Binds are extra bind mounts.
	Binds []Bind
}

// State is what a machine is doing: platforms.MachineState, the one type of
// machine states, so the states State reports reach the provider and the
// waits on the API without a conversion.
type State = platforms.MachineState

// Machine states.
const (
	// StateRunning means the machine's nspawn process is alive.
	StateRunning = platforms.MachineRunning
	// StateStopped means something of the machine is left on disk or in
	// the cgroup tree but its nspawn process is gone.
	StateStopped = platforms.MachineStopped
	// StateAbsent means nothing of the machine exists.
	StateAbsent = platforms.MachineAbsent
)

var (
	// nameRE is a DNS label: machine names are host names and path elements.
	nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// envKeyRE is a variable name systemd's EnvironmentFile= accepts.
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validate checks s and returns the machine's parsed address.
func (s *Spec) validate() (netip.Prefix, error) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !nameRE.MatchString(s.Name) {
		add("name %q: must be a DNS label (lower-case letters, digits, '-', at most 63)", s.Name)
	}
	if err := checkPath(s.Image); err != nil {
		add("image: %v", err)
	} else if !hasOSRelease(s.Image) {
		add("image %q: not an OS tree (no etc/os-release or usr/lib/os-release)", s.Image)
	}
	if !validIfName(s.Bridge) {
		add("bridge %q: must be an interface name of 1-15 characters", s.Bridge)
	}
	pfx, err := netip.ParsePrefix(s.Address)
	if err != nil || !pfx.Addr().Is4() {
		add("address %q: must be an IPv4 address with prefix, e.g. 10.66.0.11/24", s.Address)
	}
	for i, h := range s.Hosts {
		if _, err := netip.ParseAddr(h.IP); err != nil {
			add("hosts[%d].ip %q: not an IP address", i, h.IP)
		}
		for _, n := range h.Names {
			if n == "" || strings.ContainsAny(n, " \t\n#") {
				add("hosts[%d].names: invalid name %q", i, n)
			}
		}
	}
	if s.Gateway != "" {
		gw, err := netip.ParseAddr(s.Gateway)
		if err != nil || !pfx.IsValid() || !pfx.Masked().Contains(gw) || gw == pfx.Addr() {
			add("gateway %q: must be an address of the machine's network other than its own", s.Gateway)
		}
	}
	for i, r := range s.Routes {
		dst, err := netip.ParsePrefix(r)
		switch {
		case err != nil || !dst.Addr().Is4():
			add("routes[%d] %q: must be an IPv4 prefix, e.g. 172.30.0.0/16", i, r)
		case dst.Bits() == 0:
			add("routes[%d] %q: a default route would let machines reach beyond the host", i, r)
		case dst.Masked() != dst:
			add("routes[%d] %q: host bits are set (%s)", i, r, dst.Masked())
		}
	}
	for k, v := range s.Env {
		if !envKeyRE.MatchString(k) {
			add("env %q: not a variable name", k)
		}
		if strings.ContainsAny(v, "\n\x00") {
			add("env %s: value contains a newline", k)
		}
	}
	if s.CPUs < 0 || s.MemoryBytes < 0 {
		add("cpus and memory must not be negative")
	}
	for i, b := range s.Binds {
		if err := checkPath(b.Source); err != nil {
			add("binds[%d].source: %v", i, err)
		}
		if err := checkPath(b.Target); err != nil {
			add("binds[%d].target: %v", i, err)
		}
	}
	if len(problems) > 0 {
		return netip.Prefix{}, fmt.Errorf("invalid machine spec: %s", strings.Join(problems, "; "))
	}
	return pfx, nil
}

// checkPath accepts absolute, clean paths that nspawn's and overlayfs's
// option syntax can carry unescaped.
func checkPath(p string) error {
	switch {
	case p == "" || !filepath.IsAbs(p):
		return fmt.Errorf("%q is not an absolute path", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q is not a clean path", p)
	case strings.ContainsAny(p, ",:\n\\"):
		return fmt.Errorf("%q contains one of , : \\ or a newline", p)
	}
	return nil
}

func hasOSRelease(root string) bool {
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			return true
		}
	}
	return false
}

// hash identifies a spec: Create is a no-op for a running machine whose
// spec has the same hash.
func (s *Spec) hash() string {
	c := *s
	c.Env = nil
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, k+"="+s.Env[k])
	}
	data, _ := json.Marshal(struct {
		Spec Spec
		Env  []string
	}{c, pairs}) // a struct of strings, numbers and slices always marshals
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
