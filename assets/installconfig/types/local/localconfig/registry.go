package localconfig

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

// Ports of the registry add-on's default.
const (
	// FirstRegistryPort is the first port the default tries: the port
	// kind's local registry uses (5000 is often taken, by other registries
	// or by macOS's AirPlay receiver).
	FirstRegistryPort = 5001
	// registryPortTries bounds the search for a free port.
	registryPortTries = 1000
)

// vipPort names what the API load balancer serves at port p of the API
// VIP, where the registry listens too: the Kubernetes API
// (provider.APIPort) and the machine-config server (nodelayout.MCSPort);
// ok is false for any other port.
func vipPort(p int32) (what string, ok bool) {
	switch p {
	case 6443:
		return "the Kubernetes API", true
	case 22623:
		return "the machine-config server", true
	}
	return "", false
}

// setRegistryDefault sets platform.local.registryPort, when the registry
// add-on is on and the port unset, to the first port that no socket on the
// host listens on, searching from registryPortStart. The chosen port is
// kept in the cluster's install-config, so it does not move once the
// cluster exists.
func (cfg *Config) setRegistryDefault(c *types.Config) {
	l := c.Platform.Local
	if l == nil || l.RegistryPort != 0 || !addons(l).Registry {
		return
	}
	var used map[uint16]bool
	if cfg.ListeningPorts != nil {
		used, _ = cfg.ListeningPorts() // unreadable: every port counts as free; the registry's start says if it is not
	}
	start := registryPortStart(c)
	l.RegistryPort = int32(start)
	for p := start; p < start+registryPortTries; p++ {
		if _, reserved := vipPort(int32(p)); !used[uint16(p)] && !reserved {
			l.RegistryPort = int32(p)
			return
		}
	}
}

// registryPortStart is where the search for a free registry port starts:
// FirstRegistryPort plus the third byte of the machine network's address.
// Clusters on the host have different machine networks, so two /24s such as
// 10.66.101.0/24 and 10.66.102.0/24 start at different ports (5102, 5103):
// two creates at the same moment, or a create while another cluster is
// stopped (its port free but not its own), do not pick the same one, which
// a search of the host's listening sockets alone cannot promise. The
// default network 10.66.0.0/24 keeps kind's 5001.
func registryPortStart(c *types.Config) int {
	if m := c.MachineNetworkCIDRs(); len(m) > 0 && m[0].Addr().Is4() {
		return FirstRegistryPort + int(m[0].Masked().Addr().As4()[2])
	}
	return FirstRegistryPort
}

// validateRegistry checks platform.local.registryPort: a TCP port that the
// API load balancer does not use on the API VIP.
func validateRegistry(l *local.Platform, fp *field.Path) field.ErrorList {
	p := l.RegistryPort
	if p == 0 {
		return nil
	}
	if p < 1 || p > 65535 {
		return field.ErrorList{field.Invalid(fp.Child("registryPort"), p, "must be a TCP port, 1-65535")}
	}
	if what, ok := vipPort(p); ok {
		return field.ErrorList{field.Invalid(fp.Child("registryPort"), p,
			fmt.Sprintf("is the port of %s on the API VIP, where the registry listens too", what))}
	}
	return nil
}

// ReadListeningPorts returns the TCP ports that sockets of the host listen
// on, on any address (/proc/net/tcp and /proc/net/tcp6).
func ReadListeningPorts() (map[uint16]bool, error) {
	ports := map[uint16]bool{}
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6, or not Linux
			}
			return nil, err
		}
		err = parseListening(bufio.NewScanner(f), ports)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return ports, nil
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// parseListening adds to ports the local port of each listening socket of
// a /proc/net/tcp table: "sl local_address rem_address st ...", the
// address as hex "ADDR:PORT".
func parseListening(sc *bufio.Scanner, ports map[uint16]bool) error {
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) < 4 || f[3] != tcpListen {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		port, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if i < 0 || err != nil {
			return fmt.Errorf("cannot parse %q", sc.Text())
		}
		ports[uint16(port)] = true
	}
	return sc.Err()
}
