package sshconfig

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// userRE is a portable POSIX user name, as Debian's adduser accepts it.
var userRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// Config is the ssh platform's install-config logic.
type Config struct{}

// Name implements configs.Platform.
func (Config) Name() string { return ssh.Name }

// SetDefaults implements configs.Platform: the login user and port. The
// hosts' known_hosts file is the running user's own, found when kiln
// dials (KnownHostsFile).
func (Config) SetDefaults(c *types.Config) {
	s := c.Platform.SSH
	if s == nil {
		return
	}
	if s.User == "" {
		s.User = ssh.DefaultUser
	}
	if s.Port == 0 {
		s.Port = ssh.DefaultPort
	}
}

// Validate implements configs.Platform: every problem of platform.ssh at
// once, each under its field's path.
func (Config) Validate(c *types.Config, fp *field.Path) field.ErrorList {
	s := c.Platform.SSH
	var errs field.ErrorList
	if !userRE.MatchString(s.User) {
		errs = append(errs, field.Invalid(fp.Child("user"), s.User, "must be a user name: up to 32 lower-case letters, digits, _ and -, not starting with a digit or -"))
	}
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, field.Invalid(fp.Child("port"), s.Port, "must be a port, 1-65535"))
	}
	for _, f := range []struct{ name, path string }{{"identityFile", s.IdentityFile}, {"knownHostsFile", s.KnownHostsFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			errs = append(errs, field.Invalid(fp.Child(f.name), f.path, "must be an absolute path"))
		}
	}
	if s.Bastion != "" {
		if msg := hostPort(s.Bastion); msg != "" {
			errs = append(errs, field.Invalid(fp.Child("bastion"), s.Bastion, msg))
		}
	}
	if s.APIVIP != "" && !isHost(s.APIVIP) {
		errs = append(errs, field.Invalid(fp.Child("apiVIP"), s.APIVIP, "must be an IPv4 address or a DNS name"))
	}
	errs = append(errs, validateHosts(c, fp.Child("hosts"))...)
	errs = append(errs, validateAPIVIP(c, fp)...)
	errs = append(errs, validateLoadBalancerIPs(c, fp.Child("loadBalancerIPs"))...)
	errs = append(errs, validateNTPServers(c, fp.Child("ntpServers"))...)
	if c.SSHKey != "" {
		errs = append(errs, field.Forbidden(field.NewPath("sshKey"),
			"must be unset on the ssh platform: the hosts are yours, with your own logins; kiln adds no user to them (a user it added would outlive the cluster)"))
	}
	return errs
}

// validateHosts checks the hosts: names and addresses valid and unique,
// the addresses in the machine network, one bootstrap host (the only one
// that may join as a worker), and as many masters and workers as the
// pools' replicas.
func validateHosts(c *types.Config, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	names, addrs := map[string]int{}, map[netip.Addr]int{}
	count := map[string]int{}
	machines := c.MachineNetworkCIDRs()
	for i, h := range c.Platform.SSH.Hosts {
		hp := fp.Index(i)
		if msgs := validation.IsDNS1123Subdomain(h.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(hp.Child("name"), h.Name, "must be the host's hostname, a lower-case DNS name: "+strings.Join(msgs, "; ")))
		} else if j, dup := names[h.Name]; dup {
			errs = append(errs, field.Duplicate(hp.Child("name"), fmt.Sprintf("%s (also hosts[%d])", h.Name, j)))
		} else {
			names[h.Name] = i
		}
		a, err := netip.ParseAddr(h.Address)
		switch {
		case err != nil || !a.Is4():
			errs = append(errs, field.Invalid(hp.Child("address"), h.Address, "must be an IPv4 address"))
		case a.IsLoopback() || a.IsUnspecified() || a.IsMulticast():
			errs = append(errs, field.Invalid(hp.Child("address"), h.Address, "must be an address the other hosts reach, not loopback, unspecified or multicast"))
		case !inAny(machines, a):
			errs = append(errs, field.Invalid(hp.Child("address"), h.Address, "must be in networking.machineNetwork ("+prefixes(machines)+")"))
		default:
			if j, dup := addrs[a]; dup {
				errs = append(errs, field.Duplicate(hp.Child("address"), fmt.Sprintf("%s (also hosts[%d])", h.Address, j)))
			}
			addrs[a] = i
		}
		if !slices.Contains(ssh.Roles(), h.Role) {
			errs = append(errs, field.NotSupported(hp.Child("role"), h.Role, ssh.Roles()))
		}
		if h.JoinAsWorker && h.Role != ssh.RoleBootstrap {
			errs = append(errs, field.Invalid(hp.Child("joinAsWorker"), true, "only the bootstrap host joins as a worker after the install; a "+h.Role+" host is a node already"))
		}
		count[h.Role]++
		if h.Role == ssh.RoleBootstrap && h.JoinAsWorker {
			count[ssh.RoleWorker]++ // and a worker after the install
		}
	}
	if n := count[ssh.RoleBootstrap]; n != 1 {
		errs = append(errs, field.Invalid(fp, fmt.Sprintf("%d bootstrap hosts", n), "must have exactly one host with role bootstrap"))
	}
	if n, want := count[ssh.RoleMaster], c.MasterReplicas(); n != want {
		errs = append(errs, field.Invalid(fp, fmt.Sprintf("%d master hosts", n),
			fmt.Sprintf("must have as many hosts with role master as controlPlane.replicas (%d)", want)))
	}
	if n, want := count[ssh.RoleWorker], c.WorkerReplicas(); n != want {
		errs = append(errs, field.Invalid(fp, fmt.Sprintf("%d worker hosts", n),
			fmt.Sprintf("must have as many hosts with role worker, the bootstrap host among them when it has joinAsWorker, as the compute pools' replicas (%d)", want)))
	}
	return errs
}

// MachineNames implements configs.MachineNamer: the hosts' names by role,
// in the order they are listed; the bootstrap host is a worker when it
// joins as one.
func (Config) MachineNames(c *types.Config, _ string) (masters, workers []string) {
	for _, h := range c.Platform.SSH.Hosts {
		switch {
		case h.Role == ssh.RoleMaster:
			masters = append(masters, h.Name)
		case h.Worker():
			workers = append(workers, h.Name)
		}
	}
	return masters, workers
}

// MachineAddresses implements configs.MachineAddresser: the address of
// the master or worker host called name.
func (Config) MachineAddresses(c *types.Config, _ types.Resolved, _, name string) ([]netip.Addr, error) {
	h, ok := Host(c, name)
	if !ok || h.Role != ssh.RoleMaster && !h.Worker() {
		return nil, fmt.Errorf("no master or worker host is called %s in platform.ssh.hosts", name)
	}
	a, err := netip.ParseAddr(h.Address)
	if err != nil {
		return nil, fmt.Errorf("platform.ssh.hosts: %s: %w", name, err)
	}
	return []netip.Addr{a}, nil
}

// Host returns the host called name.
func Host(c *types.Config, name string) (ssh.Host, bool) {
	for _, h := range c.Platform.SSH.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return ssh.Host{}, false
}

// Hosts returns the hosts of role, in the order they are listed.
func Hosts(c *types.Config, role string) []ssh.Host {
	var out []ssh.Host
	for _, h := range c.Platform.SSH.Hosts {
		if h.Role == role {
			out = append(out, h)
		}
	}
	return out
}

// hostPort returns why s is not host or host:port, or "".
func hostPort(s string) string {
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	if !isHost(host) {
		return "must be host or host:port, the host an IPv4 address or a DNS name"
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "the port must be 1-65535"
		}
	}
	return ""
}

// isHost reports whether s is an IPv4 address or a DNS name.
func isHost(s string) bool {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Is4()
	}
	return len(validation.IsDNS1123Subdomain(s)) == 0
}

// inAny reports whether a is in one of ps.
func inAny(ps []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
}

// prefixes lists ps.
func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
