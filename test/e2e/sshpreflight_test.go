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
	start := time.Now()
	warnings, err := preflight.Run(ctx, hosts, f.Client)
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
		got = append(got, p.Host.Name+" "+p.Check+": "+p.Message)
	}
	want := "e2epre-master-0 port: something listens on TCP port 6443, kept for kube-apiserver"
	if strings.Join(got, "\n") != want {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	if after := snapshotHosts(t, f); after != before {
		t.Errorf("the preflight changed a host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// snapshotHosts lists, for each test host, the files under /etc, /var/lib,
// /usr/local and /opt with their sizes, and its systemd units' states:
// what installing onto a host changes.
func snapshotHosts(t *testing.T, f *sshFleet) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b strings.Builder
	for _, h := range f.Hosts {
		out, err := f.Client.RunScript(ctx, h.Address, "find /etc /var/lib /usr/local /opt -xdev \\( -type f -o -type l \\) -printf '%p %s\\n' | grep -v '^/var/lib/systemd/\\(timers\\|catalog\\|random-seed\\)' | sort\n"+
			"systemctl list-units --all --no-legend --plain | awk '{print $1, $3, $4}' | sort\n")
		if err != nil {
			t.Fatalf("snapshot of %s: %v", h.Name, err)
		}
		b.WriteString("== " + h.Name + "\n")
		b.Write(out)
	}
	return b.String()
}
