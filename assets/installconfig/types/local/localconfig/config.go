package localconfig

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

// DefaultMachineNetwork is the host bridge's block. It avoids the defaults
// of Docker (172.17.0.0/16), kind (172.18.0.0/16), podman (10.88.0.0/16),
// libvirt (192.168.122.0/24) and home routers (192.168.0-1.0/24), and kiln's
// own cluster (10.128.0.0/14) and service (172.30.0.0/16) networks;
// validation checks it against the host's addresses and routes anyway.
const DefaultMachineNetwork = "10.66.0.0/24"

// Limits of a local machine.
const (
	// maxBridgeName is IFNAMSIZ minus the terminating NUL.
	maxBridgeName = 15
	// minMemoryMiB is what kubelet, containerd and a static-pod control
	// plane need to start.
	minMemoryMiB = 1024
)

// ifNameRE is the characters iproute2 accepts in an interface name.
var ifNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// HostNetwork is a block the host already reaches: an address of one of
// its interfaces or a route.
type HostNetwork struct {
	// Prefix is the block.
	Prefix netip.Prefix
	// Device is the interface it is on.
	Device string
}

// Config is the local platform's install-config logic: defaults and
// validation of platform.local and of the pools' local sections.
type Config struct {
	// HostNetworks lists the host's blocks; the machine network must not
	// overlap any of them. New reads the running host.
	HostNetworks func() ([]HostNetwork, error)
	// ListeningPorts returns the TCP ports the host listens on; the
	// registry's default port is none of them. New reads the running host.
	ListeningPorts func() (map[uint16]bool, error)
}

// New returns the local platform's Config for the running host.
func New() *Config {
	return &Config{HostNetworks: ReadHostNetworks, ListeningPorts: ReadListeningPorts}
}

// Name implements configs.Platform.
func (*Config) Name() string { return local.Name }

// SetDefaults implements configs.Platform: the machine network (the
// first of 10.66.0.0/24, 10.66.1.0/24, ... that the host does not use, so a
// second cluster on the same host needs no edit), the registry add-on's
// port (registry.go) and the API VIP (the first address of the machine
// network, the host's bridge).
func (cfg *Config) SetDefaults(c *types.Config) {
	if c.Networking != nil && len(c.Networking.MachineNetwork) == 0 {
		c.Networking.MachineNetwork = []types.MachineNetworkEntry{{CIDR: cfg.freeMachineNetwork().String()}}
	}
	cfg.setRegistryDefault(c)
	l := c.Platform.Local
	if l == nil || l.APIVIP != "" {
		return
	}
	if m := c.MachineNetworkCIDRs(); len(m) > 0 {
		l.APIVIP = m[0].Addr().Next().String()
	}
}

// Validate implements configs.Platform.
func (cfg *Config) Validate(c *types.Config, fp *field.Path) field.ErrorList {
	l := c.Platform.Local
	var errs field.ErrorList
	if b := l.BridgeName; b != "" && (len(b) > maxBridgeName || !ifNameRE.MatchString(b)) {
		errs = append(errs, field.Invalid(fp.Child("bridgeName"), b,
			fmt.Sprintf("must be at most %d of the characters A-Z a-z 0-9 _ . -", maxBridgeName)))
	}
	machines := c.MachineNetworkCIDRs()
	mnp := field.NewPath("networking", "machineNetwork")
	if c.Networking != nil && len(c.Networking.MachineNetwork) > 1 {
		errs = append(errs, field.TooMany(mnp, len(c.Networking.MachineNetwork), 1))
	}
	if vip, err := netip.ParseAddr(l.APIVIP); err != nil {
		errs = append(errs, field.Invalid(fp.Child("apiVIP"), l.APIVIP, "must be an IPv4 address"))
	} else if len(machines) > 0 {
		m := machines[0]
		if !m.Contains(vip) || vip == m.Addr() || vip == lastAddr(m) {
			errs = append(errs, field.Invalid(fp.Child("apiVIP"), l.APIVIP,
				"must be a host address in networking.machineNetwork[0] ("+m.String()+")"))
		}
	}
	errs = append(errs, validateRegistry(l, fp)...)
	errs = append(errs, validatePool(l.DefaultMachinePlatform, fp.Child("defaultMachinePlatform"))...)
	if c.ControlPlane != nil {
		errs = append(errs, validatePool(c.ControlPlane.Platform.Local, field.NewPath("controlPlane", "platform", local.Name))...)
	}
	for i := range c.Compute {
		errs = append(errs, validatePool(c.Compute[i].Platform.Local, field.NewPath("compute").Index(i).Child("platform", local.Name))...)
	}
	if cfg.HostNetworks == nil || len(machines) == 0 {
		return errs
	}
	host, err := cfg.HostNetworks()
	if err != nil {
		return append(errs, field.InternalError(mnp, fmt.Errorf("reading the host's networks: %w", err)))
	}
	for i, m := range machines {
		for _, h := range host {
			if h.Prefix.Bits() > 0 && h.Prefix.Overlaps(m) {
				errs = append(errs, field.Invalid(mnp.Index(i).Child("cidr"), m.String(),
					fmt.Sprintf("overlaps %s on this host (%s); pick a block the host does not use", h.Prefix, h.Device)))
				break
			}
		}
	}
	return errs
}

// freeMachineNetwork returns the first /24 of 10.66.0.0/16 that overlaps no
// host network, or DefaultMachineNetwork (which validation then reports)
// when the host networks cannot be read or all are taken.
func (cfg *Config) freeMachineNetwork() netip.Prefix {
	def := netip.MustParsePrefix(DefaultMachineNetwork)
	if cfg.HostNetworks == nil {
		return def
	}
	host, err := cfg.HostNetworks()
	if err != nil {
		return def
	}
	base := def.Addr().As4()
	for n := 0; n < 256; n++ {
		base[2] = byte(n)
		cand := netip.PrefixFrom(netip.AddrFrom4(base), def.Bits())
		free := true
		for _, h := range host {
			if h.Prefix.Bits() > 0 && h.Prefix.Overlaps(cand) {
				free = false
				break
			}
		}
		if free {
			return cand
		}
	}
	return def
}

func validatePool(p *local.MachinePool, fp *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	if p.CPUs < 0 {
		errs = append(errs, field.Invalid(fp.Child("cpus"), p.CPUs, "must be 0 (no limit) or more"))
	}
	if p.MemoryMiB != 0 && p.MemoryMiB < minMemoryMiB {
		errs = append(errs, field.Invalid(fp.Child("memoryMiB"), p.MemoryMiB,
			fmt.Sprintf("must be 0 (no limit) or at least %d", minMemoryMiB)))
	}
	return errs
}

// lastAddr is the broadcast address of an IPv4 block.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}

// ReadHostNetworks returns the IPv4 blocks of the host's interface
// addresses and of its routing table (/proc/net/route).
func ReadHostNetworks() ([]HostNetwork, error) {
	var out []HostNetwork
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
				out = append(out, HostNetwork{Prefix: p.Masked(), Device: ifc.Name})
			}
		}
	}
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return out, nil // not Linux: addresses only
	}
	defer f.Close()
	routes, err := parseRoutes(bufio.NewScanner(f))
	return append(out, routes...), err
}

// parseRoutes reads /proc/net/route: Iface, Destination and Mask are
// little-endian hex IPv4 values.
func parseRoutes(sc *bufio.Scanner) ([]HostNetwork, error) {
	var out []HostNetwork
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 8 {
			continue
		}
		dst, err1 := hex.DecodeString(f[1])
		mask, err2 := hex.DecodeString(f[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			return nil, fmt.Errorf("/proc/net/route: cannot parse %q", sc.Text())
		}
		ones, _ := net.IPMask{mask[3], mask[2], mask[1], mask[0]}.Size()
		addr := netip.AddrFrom4([4]byte{dst[3], dst[2], dst[1], dst[0]})
		out = append(out, HostNetwork{Prefix: netip.PrefixFrom(addr, ones).Masked(), Device: f[0]})
	}
	return out, sc.Err()
}
