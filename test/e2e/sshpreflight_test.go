package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/platforms/ssh/preflight"
)

// TestSSHPreflight boots three plain Debian 12 test hosts with sshd, one
// of which (the master) also has sshd on 6443, and runs kiln's preflight
// on them over SSH: the one problem it must find is that port on that
// host, with nothing changed on any of them.
func TestSSHPreflight(t *testing.T) {
	requireMachineHost(t, "debootstrap")
	busy := map[string]map[string]string{"e2epre-master-0": {"/etc/ssh/sshd_config.d/kiln-e2e-busy.conf": "Port 22\nPort 6443\n"}}
	f := startSSHHosts(t, 9, []string{"e2epre-bootstrap", "e2epre-master-0", "e2epre-worker-0"}, busy)
	roles := []preflight.Role{preflight.Bootstrap, preflight.Master, preflight.Worker}
	var hosts []preflight.Host
	for i, h := range f.Hosts {
		hosts = append(hosts, preflight.Host{Name: h.Name, Address: h.Address, Role: roles[i]})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := snapshotHosts(t, f)
	for _, want := range []string{"/etc/ssh/sshd_config ", "ssh.service active running", "sshd: /usr/sbin/sshd -D [listener]\n", "\nhost0: <", "# nftables", "# routes", "# mounts"} {
		if strings.Count(before, want) != len(hosts) {
			t.Fatalf("the snapshot of a host lacks %q:\n%s", want, before)
		}
	}
	start := time.Now()
	warnings, err := preflight.Run(ctx, hosts, nil, f.Client)
	t.Logf("MEASURE preflight of %d hosts over SSH: %s", len(hosts), time.Since(start).Round(time.Millisecond))
	for _, w := range warnings {
		t.Logf("warning: %s", w)
	}
	var perr *preflight.Error
	if !errors.As(err, &perr) {
		t.Fatalf("preflight: %v; want the busy port of e2epre-master-0", err)
	}
	var got []string
	for _, p := range perr.Problems {
		t.Logf("problem: %s %s: %s", p.Host.Name, p.Check, p.Message)
		got = append(got, p.Host.Name+" "+p.Check+": "+p.Message)
	}
	want := "e2epre-master-0 port: something listens on TCP port 6443, kept for kube-apiserver"
	if strings.Join(got, "\n") != want {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	assertHostsAsBefore(t, f, before, "the preflight changed a host")
}
