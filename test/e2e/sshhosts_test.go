package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/ssh/remote"
	"github.com/kiln-project/kiln/platforms/ssh/remote/remotetest"
)

// sshHostPackages make a test host: a plain Debian 12 server with systemd
// and OpenSSH, nothing of Kubernetes and nothing of kiln's node image,
// plus what docs/platform-ssh.md asks a host to have (iptables), and an
// NTP client kiln can give time servers (chrony; it starts on a test host
// only where its owner lets it: ownerChronyScript). The
// machine tests boot the same tree (they ping: iputils-ping), so a cold
// run debootstraps once, not twice.
var sshHostPackages = []string{"systemd", "systemd-sysv", "dbus", "openssh-server", "sudo", "iproute2", "iputils-ping", "procps", "kmod", "nftables", "iptables", "chrony"}

// sshHostRootfs is the cached tree of the test hosts. The keys openssh's
// package made are removed: each host gets its own (sshFleet), as
// separately installed machines have.
func sshHostRootfs(t *testing.T) string {
	t.Helper()
	return debootstrapRootfs(t, "rootfs-sshhost", sshHostPackages, func(root string) error {
		keys, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
		for _, k := range keys {
			if err := os.Remove(k); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(root, "etc/machine-id"), nil, 0o444)
	})
}

// sshHost is one test host: what install-config.yaml would name.
type sshHost struct {
	Name, Address string
}

// sshFleet is test hosts booted as systemd-nspawn machines on a bridge of
// their own, each with its own SSH host key, all accepting one client key
// for root: what a user's servers are to kiln.
type sshFleet struct {
	Hosts []sshHost
	// Client reaches them as root with the fleet's key, checking their
	// keys against the fleet's known_hosts.
	Client *remote.Client
	// KeyFile and KnownHosts are the client's key and the hosts' keys.
	KeyFile, KnownHosts string
	m                   *machine.Manager
	specs               map[string]machine.Spec
	stateRoot, bridge   string
}

// startSSHHosts boots one test host per name on a fresh bridge (subnet
// 10.2xx.<third>.0/24, hosts from .11) and waits until each answers SSH.
// extra adds files to a host, by name: its path inside the host → content.
// Everything is removed when the test ends.
func startSSHHosts(t *testing.T, third int, names []string, extra map[string]map[string]string) *sshFleet {
	t.Helper()
	image := sshHostRootfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stateRoot, err := os.MkdirTemp("/var/lib", "kiln-e2e-sshhosts-")
	if err != nil {
		t.Fatal(err)
	}
	r := machine.ExecRunner{Log: testLogger(t)}
	suffix := fmt.Sprintf("%04x", os.Getpid()&0xffff)
	f := &sshFleet{m: machine.NewManager(machine.Options{StateRoot: stateRoot, Log: testLogger(t)}),
		stateRoot: stateRoot, bridge: "kilnssh" + suffix}
	subnet := freeSubnet(t, third)
	if err := machine.EnsureBridge(ctx, r, f.bridge, subnet+"1/24"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.stop(t) })

	keys := filepath.Join(stateRoot, "keys")
	f.KeyFile = filepath.Join(keys, "client")
	clientPub := remotetest.WriteKey(t, f.KeyFile)
	authorized := filepath.Join(keys, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}
	var known []string
	specs := make([]machine.Spec, len(names))
	for i, n := range names {
		h := sshHost{Name: n, Address: fmt.Sprintf("%s%d", subnet, 11+i)}
		f.Hosts = append(f.Hosts, h)
		hostKey := filepath.Join(keys, n)
		hostPub := remotetest.WriteKey(t, hostKey)
		known = append(known, knownhosts.Line([]string{knownhosts.Normalize(h.Address)}, hostPub))
		binds := []machine.Bind{
			{Source: hostKey, Target: "/etc/ssh/ssh_host_ed25519_key", ReadOnly: true},
			{Source: authorized, Target: "/root/.ssh/authorized_keys", ReadOnly: true},
		}
		j := 0
		for path, content := range extra[n] {
			src := filepath.Join(keys, fmt.Sprintf("%s-extra-%d", n, j))
			j++
			if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			binds = append(binds, machine.Bind{Source: src, Target: path, ReadOnly: true})
		}
		specs[i] = machine.Spec{Name: n, Image: image, Bridge: f.bridge, Address: h.Address + "/24",
			CPUs: 1, MemoryBytes: 2 << 30, Binds: binds}
	}
	f.KnownHosts = filepath.Join(keys, "known_hosts")
	if err := os.WriteFile(f.KnownHosts, []byte(strings.Join(known, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	createAll(t, ctx, f.m, specs)
	f.specs = map[string]machine.Spec{}
	for _, sp := range specs {
		f.specs[sp.Name] = sp
	}
	f.Client, err = remote.New(remote.Config{User: "root", IdentityFile: f.KeyFile, KnownHostsFile: f.KnownHosts})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range f.Hosts {
		if _, err := f.m.WaitBooted(ctx, h.Name); err != nil {
			dumpMachine(t, f.m, stateRoot, h.Name)
			t.Fatalf("test host %s did not boot: %v", h.Name, err)
		}
		if err := waitSSH(ctx, f.Client, h.Address); err != nil {
			dumpMachine(t, f.m, stateRoot, h.Name)
			t.Fatalf("test host %s: %v", h.Name, err)
		}
	}
	return f
}

// reboot stops the test host name and starts it again from its disk, as
// a user's server reboots, and waits until it answers SSH.
func (f *sshFleet) reboot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := f.m.Stop(ctx, name); err != nil {
		t.Fatalf("stopping test host %s: %v", name, err)
	}
	f.start(ctx, t, name)
}

// start starts the stopped test host name from its disk and waits until
// it answers SSH.
func (f *sshFleet) start(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := f.m.Start(ctx, f.specs[name]); err != nil {
		t.Fatalf("starting test host %s again: %v", name, err)
	}
	if _, err := f.m.WaitBooted(ctx, name); err != nil {
		t.Fatalf("test host %s did not boot again: %v", name, err)
	}
	for _, h := range f.Hosts {
		if h.Name == name {
			if err := waitSSH(ctx, f.Client, h.Address); err != nil {
				t.Fatalf("test host %s after its reboot: %v", name, err)
			}
		}
	}
}

// waitSSH waits until the host runs a command over SSH.
func waitSSH(ctx context.Context, c *remote.Client, address string) error {
	var last error
	for {
		out, err := c.RunScript(ctx, address, "echo ok\n")
		if err == nil && string(out) == "ok\n" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no SSH after the boot: %v", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stop destroys the hosts and the bridge and removes their state.
func (f *sshFleet) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, h := range f.Hosts {
		if t.Failed() {
			dumpMachine(t, f.m, f.stateRoot, h.Name)
		}
		if err := f.m.Destroy(ctx, h.Name); err != nil {
			t.Errorf("destroying test host %s: %v", h.Name, err)
		}
	}
	if err := machine.DeleteBridge(ctx, machine.ExecRunner{Log: testLogger(t)}, f.bridge); err != nil {
		t.Errorf("deleting bridge %s: %v", f.bridge, err)
	}
	removeStateRoot(t, f.stateRoot)
}

// snapshotScript prints what installing onto a host changes: the files
// under /etc, /usr, /var/lib and /opt with their sizes (but systemd's own
// timestamps and seeds, and chrony's measurements of the clock, which the
// host's own chrony keeps whenever it synchronises, kiln or not), the
// systemd units' states, the processes (but the
// snapshot's own: sshd's session, the shell, its pipeline's commands, also
// when ps sees one exiting with its name in brackets; sshd's count of logins under
// way; root's login session and user manager, where pam_systemd makes
// them), the network interfaces (without the index of a veth's peer, which
// a test host's restart changes), the nftables ruleset, the routes and the
// mounts.
const snapshotScript = `echo '# files'
find /etc /usr /var/lib /opt \( -type f -o -type l \) -printf '%p %s\n' | grep -v -e '^/var/lib/systemd/\(timers\|catalog\|random-seed\)' -e '^/var/lib/chrony/' | sort
echo '# units'
systemctl list-units --all --no-legend --plain | awk '{print $1, $3, $4}' | grep -v -e '^session-[0-9]*\.scope ' -e '^user' | sort
echo '# processes'
ps -eo user=,args= | grep -v -e '^root *sshd: root' -e '^root *ps -eo' -e '^root */bin/sh -s' -e '^root *grep ' -e '^root *sed ' -e '^root *sort$' -e '^root *\[\(awk\|find\|grep\|sed\|sort\)\]$' -e '^root *(sd-pam)' -e '^root */lib/systemd/systemd --user' | sed 's/\[listener\].*/[listener]/' | sort
echo '# interfaces'
ip -o link show | awk '{print $2, $3}' | sed 's/@if[0-9]*:/:/' | sort
echo '# nftables'
nft list ruleset
echo '# routes'
ip route show table all
ip -6 route show table all
echo '# mounts'
findmnt -rn -o TARGET,FSTYPE | sort
`

// snapshotHosts returns, for each test host, what snapshotScript prints:
// what installing onto a host changes.
func snapshotHosts(t *testing.T, f *sshFleet) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b strings.Builder
	for _, h := range f.Hosts {
		out, err := f.Client.RunScript(ctx, h.Address, snapshotScript)
		if err != nil {
			t.Fatalf("snapshot of %s: %v", h.Name, err)
		}
		b.WriteString("== " + h.Name + "\n")
		b.Write(out)
	}
	return b.String()
}

// assertHostsAsBefore fails the test with what differs when the hosts'
// snapshot does not hold the lines of before, each as many times; the
// same lines in another order pass, logged (it cannot see two rules of a
// chain swapped, which kiln's reset never does). A difference that is
// gone within a few seconds is the teardown of a session or command still
// under way (a busy host's sshd or logind finishing the last login), not
// a change left behind: it is logged, not failed.
func assertHostsAsBefore(t *testing.T, f *sshFleet, before, what string) {
	t.Helper()
	after := snapshotHosts(t, f)
	for i := 0; lineDiff(before, after) != "" && i < 3; i++ {
		diff := lineDiff(before, after)
		time.Sleep(2 * time.Second)
		if after = snapshotHosts(t, f); lineDiff(before, after) == "" {
			t.Logf("a difference gone %d s later (passing, not left behind):\n%s", 2*(i+1), diff)
		}
	}
	if diff := lineDiff(before, after); diff != "" {
		t.Errorf("%s:\n%s", what, diff)
	} else if after != before {
		// The same lines in another order (seen after a host's reboot:
		// nft lists tables in the order they were made, likely).
		t.Logf("%s in line order only (passing)", what)
	}
}

// lineDiff lists the lines only in a (-) and only in b (+), host by host
// for snapshots of several (their "== <host>" sections), sorted.
func lineDiff(a, b string) string {
	count := map[string]int{}
	tally := func(s string, d int) {
		host := ""
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "== ") {
				host = strings.TrimPrefix(l, "== ") + ": "
			}
			count[host+l] += d
		}
	}
	tally(a, 1)
	tally(b, -1)
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "- "+l)
		case n < 0:
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
