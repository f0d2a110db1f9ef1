// Package resolvers reads which DNS resolvers a host names: its
// resolv.conf, or systemd-resolved's list of its upstreams where
// resolv.conf names only its stub (127.0.0.53). The API load balancer's
// DNS forwarder forwards to them (platforms/lb), and kubelet gives pods
// the file that names them (cmd/node/resolvconf).
package resolvers

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
)

// ResolvConfs returns the files naming the host's resolvers, in the order
// they are read: resolv.conf, and systemd-resolved's list of its own
// upstreams for a resolv.conf that names only loopback addresses.
func ResolvConfs() []string {
	return []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}
}

// Of returns the resolvers (ip:53) that files name, read with read: the
// first file's, unless they are all loopback addresses and a
// later file names others (systemd-resolved's stub on 127.0.0.53 in
// /etc/resolv.conf, its upstreams in /run/systemd/resolve/resolv.conf).
// Loopback resolvers are kept when nothing better is named: a program on
// the host (the API load balancer's DNS forwarder) reaches them there.
func Of(files []string, read func(string) ([]byte, error)) []string {
	_, ups := ConfOf(files, read)
	return ups
}

// ConfOf returns the file of files whose resolvers Of returns, and those
// resolvers: the first file naming any, unless it names only loopback
// addresses and a later one names others. It returns "" and nil when no
// file names a resolver.
func ConfOf(files []string, read func(string) ([]byte, error)) (string, []string) {
	var first string
	var firstUps []string
	for _, f := range files {
		data, err := read(f)
		if err != nil {
			continue
		}
		var ups []string
		loopbackOnly := true
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 || fields[0] != "nameserver" {
				continue
			}
			a, err := netip.ParseAddr(fields[1])
			if err != nil {
				continue
			}
			loopbackOnly = loopbackOnly && a.IsLoopback()
			ups = append(ups, net.JoinHostPort(a.WithZone("").String(), "53"))
		}
		if firstUps == nil {
			first, firstUps = f, ups
		}
		if len(ups) > 0 && !loopbackOnly {
			return f, ups
		}
	}
	return first, firstUps
}
