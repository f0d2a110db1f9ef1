package machine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Paths inside a machine's root that Create writes (and
// nodelayout.NodeEnvFile and nodelayout.IgnitionConfigFile).
const (
	networkPath = "/etc/systemd/network/10-host0.network"
	// stopTimeoutPath bounds how long the machine's systemd waits for a
	// unit to stop, so a stuck pod cannot hold a shutdown for 90 s.
	stopTimeoutPath = "/etc/systemd/system.conf.d/10-kiln-stop-timeout.conf"
	networkdWants   = "/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
)

// rootFile is one file Create writes into a machine's root.
type rootFile struct {
	Path string // inside the machine
	Data []byte
	Mode fs.FileMode
}

// rootFiles returns the files that configure a machine before boot;
// machineID is written only when non-empty (a first boot), the node
// environment and the Ignition config only when the spec has them (a
// machine that stands for a user's host has neither).
func rootFiles(s *Spec, addr netip.Prefix, machineID string) []rootFile {
	files := []rootFile{
		{"/etc/hostname", []byte(s.Name + "\n"), 0o644},
		{"/etc/hosts", []byte(hostsFile(s, addr)), 0o644},
		{networkPath, []byte(networkFile(addr, s.Gateway, s.Routes)), 0o644},
	}
	if s.Gateway != "" {
		// The host forwards DNS on its address on the bridge (the API
		// load balancer's forwarder) to its own resolvers.
		files = append(files, rootFile{"/etc/resolv.conf", []byte("nameserver " + s.Gateway + "\n"), 0o644})
	}
	if s.Env != nil {
		files = append(files, rootFile{nodelayout.NodeEnvFile, []byte(nodelayout.EnvFile(s.Env)), 0o644})
	}
	if s.Ignition != nil {
		files = append(files, rootFile{nodelayout.IgnitionConfigFile, s.Ignition, 0o600})
	}
	files = append(files, rootFile{stopTimeoutPath, []byte("[Manager]\nDefaultTimeoutStopSec=15s\n"), 0o644})
	if machineID != "" {
		files = append(files, rootFile{"/etc/machine-id", []byte(machineID + "\n"), 0o444})
	}
	for _, sc := range nodelayout.KubeletSysctls() {
		files = append(files, rootFile{path.Join(sysctlShimDir, sc.Key), []byte(sc.Value + "\n"), 0o444})
	}
	return files
}

// hostsFile is the machine's /etc/hosts.
func hostsFile(s *Spec, addr netip.Prefix) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	fmt.Fprintf(&b, "%s\t%s\n", addr.Addr(), s.Name)
	for _, h := range s.Hosts {
		fmt.Fprintf(&b, "%s\t%s\n", h.IP, strings.Join(h.Names, " "))
	}
	return b.String()
}

// networkFile configures the machine's end of the veth with its static
// address, the default route through gateway when there is one (egress
// NAT; without it machines talk to each other and to the host, never
// beyond it) and the on-link routes (Spec.Routes). systemd-networkd
// applies the routes whenever it configures host0, at every boot, before
// any Kubernetes component starts.
func networkFile(addr netip.Prefix, gateway string, routes []string) string {
	var b strings.Builder
	b.WriteString("[Match]\nName=host0\n\n[Network]\nAddress=" + addr.String() +
		"\nLinkLocalAddressing=no\nIPv6AcceptRA=no\nLLMNR=no\nMulticastDNS=no\n")
	if gateway != "" {
		b.WriteString("Gateway=" + gateway + "\n")
	}
	for _, r := range routes {
		b.WriteString("\n[Route]\nDestination=" + r + "\nScope=link\n")
	}
	return b.String()
}

// newMachineID returns a random systemd machine ID.
func newMachineID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40 // a v4 UUID, as systemd-id128 new
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:]), nil
}

// writeInRoot writes a file below root without following symbolic links: a
// link in the image (an absolute /etc/hosts link, say) must never redirect
// the write to the host. Parent directories are created 0755; the file is
// written atomically (a link at the file's own name is replaced, not
// followed).
func writeInRoot(root string, f rootFile) error {
	dir, err := mkdirInRoot(root, path.Dir(path.Clean(f.Path)))
	if err != nil {
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	target := filepath.Join(dir, path.Base(f.Path))
	if st, err := os.Lstat(target); err == nil && st.IsDir() {
		return fmt.Errorf("writing %s: it is a directory", f.Path)
	}
	return atomicfile.Write(target, f.Data, f.Mode)
}

// mkdirInRoot creates the directory dir (a path inside the machine) below
// root, 0755, refusing to pass through symbolic links; it returns the host
// path.
func mkdirInRoot(root, dir string) (string, error) {
	host := root
	for _, p := range strings.Split(strings.Trim(path.Clean(dir), "/"), "/") {
		if p == "" {
			continue
		}
		host = filepath.Join(host, p)
		st, err := os.Lstat(host)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(host, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case !st.IsDir():
			return "", fmt.Errorf("%s is not a directory (or is a symbolic link)", host)
		}
	}
	return host, nil
}

// enableNetworkd enables systemd-networkd in the machine (which applies
// the host0 address) unless the image already does.
func enableNetworkd(root string) error {
	for _, unit := range []string{"/lib/systemd/system/systemd-networkd.service", "/usr/lib/systemd/system/systemd-networkd.service"} {
		if _, err := os.Stat(filepath.Join(root, unit)); err != nil {
			continue
		}
		link := filepath.Join(root, networkdWants)
		if _, err := os.Lstat(link); err == nil {
			return nil
		}
		if _, err := mkdirInRoot(root, path.Dir(networkdWants)); err != nil {
			return err
		}
		return os.Symlink(unit, link)
	}
	return fmt.Errorf("the image has no systemd-networkd.service")
}
