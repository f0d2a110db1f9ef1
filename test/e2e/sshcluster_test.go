package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
)

// TestSSHCluster installs a cluster onto plain Debian 12 test hosts (a
// bootstrap host, three masters and a worker; systemd-nspawn
// containers with sshd on a bridge, never kiln's node image) with
// `kiln create cluster` on the ssh platform: preflight over SSH, the node
// payload, the ssh platform's Terraform stages through kiln's kilnssh
// provider, the bootstrap host's control plane handing over to the masters
// and reset, every host reaching the API through its own proxy. Then a
// Service answers across hosts; a LoadBalancer Service gets an address of
// loadBalancerIPs from MetalLB, answered from the test host, and again
// from another node once the announcing node's host stops
// (assertSSHLoadBalancer); a master's host stops and the API still
// serves, to the other hosts through their proxies and to the user at the
// API VIP; the first master's host reboots and its Node is Ready again;
// on day 2 `kiln scale cluster` installs a new worker host in the first
// worker's place and resets that one, then replaces a master (its host
// reset and installed again); two masters lose etcd's data and `kiln
// restore cluster` brings back a backup over SSH (restoreSSHCluster);
// `kiln destroy cluster` resets every host, and each one's files, units,
// processes, interfaces, rules, routes and mounts equal a snapshot taken
// before the install.
func TestSSHCluster(t *testing.T) {
	testSSHCluster(t, sshClusterOptions{name: "e2essh", third: 12, masters: 3, dayTwo: true, loadBalancer: true, managedVIP: true})
}

// TestSSHClusterVXLAN installs a cluster on two hosts, a master and the
// bootstrap host, which joins as the worker once it has been reset
// (joinAsWorker), whose pod network is the KilnVXLAN overlay (hosts that
// reach each other by IP only, docs/pod-network.md). The worker's host
// then moves to a second L2 segment behind a router (splitSegments): the
// Service answers across hosts through the tunnel on each host; `kiln
// stop cluster` stops both nodes, the master's host reboots with its node
// stopped, and `kiln start cluster` brings the cluster back
// (restartSSHCluster) and its API VIP, which kiln keeps (announced from
// the one master), and `kiln certs renew` gives the master new
// certificates over SSH (assertRenew); the master's host reboots, and `kiln destroy
// cluster`, through the router, leaves every host as it was (the tunnel
// device gone, the bootstrap host reset twice), the firewall rules its
// owner keeps there before the install among it. The cluster is connected
// (networking.egress NAT) to its hosts' closed LAN (sshlan_test.go):
// before the split, a pod on each node reaches a server there by the name
// the hosts' resolver, on that server, gives it. A volume of the storage
// add-on in use keeps its file through the stop, start and reboots, and
// the destroy's reset takes it away with the rest, and so does it with the
// files a MachineConfig put on the worker's host (assertHostMachineConfig).
func TestSSHClusterVXLAN(t *testing.T) {
	testSSHCluster(t, sshClusterOptions{name: "e2esshvx", third: 13, masters: 1, networkType: "KilnVXLAN", bootWorker: true, restart: true, lan: true, ownerFirewall: true, managedVIP: true})
}

// TestSSHClusterUpgrade installs a cluster of the older release kiln pins
// (a bootstrap host, a master and a worker) onto Debian test hosts and
// upgrades it with kiln upgrade cluster (upgradeSSHCluster), killed with
// SIGKILL in a kubelet step and run again, while a canary writes; a
// fourth host then joins as the worker in the first's place and boots
// straight into the new release (assertBootedRelease: its extension only,
// no catch-up); then the rest of testSSHCluster runs on the upgraded
// cluster: the master's host reboots into the new release's merged
// payload, and the destroy's reset leaves every host as it was, the new
// release's extension and the payload kept aside for a rollback gone with
// the rest. Like
// TestClusterUpgrade it runs under make test-all (KILN_E2E_ALL=1), which
// builds the older release's node image when it is not cached.
func TestSSHClusterUpgrade(t *testing.T) {
	requireMachineHost(t, "debootstrap")
	requireAll(t, "TestSSHClusterUpgrade ("+olderRelease+" → "+release.Default().Kubernetes+" on ssh hosts)", "a cluster of its own, more than make test's hour leaves")
	from := requireCachedRelease(t, "TestSSHClusterUpgrade ("+olderRelease+" → "+release.Default().Kubernetes+" on ssh hosts)", olderRelease)
	testSSHCluster(t, sshClusterOptions{name: "e2esshup", third: 14, masters: 1, upgradeFrom: from.Kubernetes})
}

// sshClusterOptions are the cluster a testSSHCluster installs.
type sshClusterOptions struct {
	// name is the cluster's name and its hosts' names' prefix.
	name string
	// third is the test hosts' subnet (startSSHHosts).
	third int
	// masters is the number of master hosts (and 1 worker).
	masters int
	// bootWorker has the bootstrap host join as the worker
	// (joinAsWorker) instead of a worker host of its own.
	bootWorker bool
	// networkType is networking.networkType ("": the default).
	networkType string
	// dayTwo runs the scale steps (with 3 masters): one more host is
	// booted for them.
	dayTwo bool
	// restart runs kiln stop cluster and kiln start cluster
	// (restartSSHCluster), the first master's host rebooted while its
	// node is stopped.
	restart bool
	// lan makes the cluster connected (networking.egress NAT) to a
	// server on the hosts' closed LAN (startLAN), their resolver, which
	// a pod on each node reaches by name.
	lan bool
	// upgradeFrom is the release the cluster is created at, upgraded to
	// the default one right after the install ("": created at the
	// default).
	upgradeFrom string
	// ownerFirewall gives each host, before the install, firewall rules
	// of its owner's, kept across reboots (ownerFirewallScript), which
	// destroy must leave as they were.
	ownerFirewall bool
	// loadBalancer gives the cluster loadBalancerIPs (sshLBPool) and
	// checks a LoadBalancer Service and its failover
	// (assertSSHLoadBalancer).
	loadBalancer bool
	// managedVIP gives apiVIP a free address (sshVIP), which kiln keeps:
	// the master stopped is the one that announces it, and the API must
	// answer there again within seconds (else apiVIP is the first
	// master's address).
	managedVIP bool
}

// sshLBPool is the last octets of the addresses of the hosts' subnet a
// cluster with loadBalancer gives its LoadBalancer Services.
var sshLBPool = [2]int{200, 209}

// ownerFirewallScript gives a host what its owner may keep in its
// firewall, kept across reboots as netfilter-persistent keeps it: a unit
// of the owner's that, before the network comes up at each boot, adds an
// iptables rule (iptables-nft makes table ip filter with its INPUT chain
// only) for IPv4 and IPv6, and an nftables table of their own; the unit
// is enabled and started now, before kiln's record.
const ownerFirewallScript = `set -e
cat >/etc/owner-firewall.sh <<'RULES'
iptables -A INPUT -p tcp --dport 2222 -j ACCEPT
ip6tables -A INPUT -p tcp --dport 2222 -j ACCEPT
nft add table inet owner
nft add chain inet owner input '{ type filter hook input priority 10; policy accept; }'
nft add rule inet owner input tcp dport 2223 accept
RULES
cat >/etc/systemd/system/owner-firewall.service <<'UNIT'
[Unit]
Description=The owner's firewall rules
DefaultDependencies=no
Before=network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -e /etc/owner-firewall.sh

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now --quiet owner-firewall.service
`

// testSSHCluster is TestSSHCluster with o's cluster.
func testSSHCluster(t *testing.T, o sshClusterOptions) {
	requireMachineHost(t, "debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	kiln := buildStaticKiln(t)
	names := []string{o.name + "-boot"}
	for i := range o.masters {
		names = append(names, fmt.Sprintf("%s-master-%d", o.name, i))
	}
	if !o.bootWorker {
		names = append(names, o.name+"-worker-0")
	}
	if o.dayTwo || o.upgradeFrom != "" {
		// The last host joins on day 2 (after the upgrade), in the first
		// worker's place.
		names = append(names, o.name+"-worker-1")
	}
	// The hosts' resolver is the LAN server's address, which needs their
	// subnet before they boot: the one startSSHHosts takes.
	var extra map[string]map[string]string
	lanSubnet := freeSubnet(t, o.third)
	if o.lan {
		extra = map[string]map[string]string{}
		for _, n := range names {
			extra[n] = lanResolvConf(lanSubnet)
		}
	}
	f := startSSHHosts(t, o.third, names, extra)
	boot, masters := f.Hosts[0], f.Hosts[1:1+o.masters]
	// The hosts create installs, and the worker among them.
	installed, worker := f.Hosts[:1+o.masters], boot
	if !o.bootWorker {
		installed, worker = f.Hosts[:2+o.masters], f.Hosts[1+o.masters]
	}
	// The hosts with a node once the install is done.
	nodes := append(slices.Clone(masters), worker)

	dir := t.TempDir()
	subnet := boot.Address[:strings.LastIndex(boot.Address, ".")+1]
	var hosts strings.Builder
	for i, h := range installed {
		role := "master"
		switch {
		case i == 0 && o.bootWorker:
			role = "bootstrap, joinAsWorker: true"
		case i == 0:
			role = "bootstrap"
		case h == worker:
			role = "worker"
		}
		fmt.Fprintf(&hosts, "    - {name: %s, address: %s, role: %s}\n", h.Name, h.Address, role)
	}
	apiVIP := masters[0].Address
	if o.managedVIP {
		apiVIP = fmt.Sprint(subnet, sshVIP)
	}
	networkType := ""
	if o.networkType != "" {
		networkType = "  networkType: " + o.networkType + "\n"
	}
	cfg := fmt.Sprintf(`apiVersion: kiln.dev/v1
baseDomain: e2e.example.com
metadata:
  name: %s
controlPlane:
  name: master
  replicas: %d
controlPlaneHardwareSpeed: %s
compute:
- name: worker
  replicas: 1
networking:
  egress: None
  machineNetwork:
  - cidr: %s0/24
%splatform:
  ssh:
    identityFile: %s
    knownHostsFile: %s
    apiVIP: %s
    hosts:
%s`, o.name, o.masters, map[bool]string{true: "Slower", false: "Standard"}[o.masters > 1], subnet, networkType, f.KeyFile, f.KnownHosts, apiVIP, hosts.String())
	if o.loadBalancer {
		cfg = strings.Replace(cfg, "    hosts:\n", fmt.Sprintf("    loadBalancerIPs: [%s%d-%s%d]\n    hosts:\n", subnet, sshLBPool[0], subnet, sshLBPool[1]), 1)
	}
	if o.upgradeFrom != "" {
		cfg += "kubernetesVersion: " + o.upgradeFrom + "\n"
	}
	var lanAddr string
	if o.lan {
		if subnet != lanSubnet {
			t.Fatalf("the hosts' subnet %s0/24 is not %s0/24, their resolv.conf's", subnet, lanSubnet)
		}
		lanAddr = startLAN(t, f, subnet)
		kiln = closedLANKiln(ctx, t, f, kiln)
		cfg = strings.Replace(cfg, "  egress: None\n", "  egress: NAT\n", 1)
		// The LAN's server is the hosts' time server too, which their
		// chrony, run by their owner, is given.
		cfg = strings.Replace(cfg, "    hosts:\n", "    ntpServers: ["+lanAddr+"]\n    hosts:\n", 1)
		for _, h := range f.Hosts {
			if out, err := f.Client.RunScript(ctx, h.Address, ownerChronyScript); err != nil {
				t.Fatalf("the owner's chrony on %s: %v\n%s", h.Name, err, out)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if o.ownerFirewall {
		for _, h := range f.Hosts {
			if out, err := f.Client.RunScript(ctx, h.Address, ownerFirewallScript); err != nil {
				t.Fatalf("the owner's firewall rules on %s: %v\n%s", h.Name, err, out)
			}
		}
	}
	before := snapshotHosts(t, f)
	if o.ownerFirewall && strings.Count(before, "tcp dport 2222") != 2*len(f.Hosts) {
		t.Fatalf("the hosts' snapshot lacks the owner's firewall rules:\n%s", before)
	}
	diagnose := func() string {
		var b strings.Builder
		for _, h := range f.Hosts {
			out, _ := f.Client.RunScript(context.Background(), h.Address, `systemctl --no-pager --failed
for u in kiln-api-proxy kiln-ignition kubelet bootkube kiln-etcd-member; do echo "== $u"; journalctl --no-pager -n 8 -u $u.service; done`)
			b.WriteString("== host " + h.Name + "\n" + string(out))
		}
		b.WriteString(diagnoseCSRs(dir))
		return b.String()
	}

	start := time.Now()
	out, err := runKiln(t, kiln, 40*time.Minute, "create", "cluster", "--dir", dir)
	destroyed := false
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(diagnose())
		}
		// Before the hosts go: the cluster's payload in kiln's cache goes
		// with it.
		if !destroyed {
			if out, err := runKiln(t, kiln, 15*time.Minute, "destroy", "cluster", "--dir", dir); err != nil {
				t.Errorf("destroy cluster after a failure: %v\n%s", err, lastLines(out, 20))
			}
		}
	})
	if err != nil {
		t.Fatalf("create cluster: %v\n%s", err, lastLines(out, 60))
	}
	t.Logf("create cluster's steps:\n%s", lastLines(out, 70))
	t.Logf("MEASURE create cluster on %d ssh hosts (1 bootstrap%s, %d masters%s%s): %s", len(installed),
		map[bool]string{true: " joining as the worker"}[o.bootWorker], o.masters, map[bool]string{false: ", 1 worker"}[o.bootWorker],
		map[bool]string{true: ", " + o.networkType}[o.networkType != ""], time.Since(start).Round(time.Second))
	assertOutput(t, "create cluster", out, "Checking "+fmt.Sprint(len(installed))+" hosts over SSH", "Install complete!", "Time elapsed:")
	client, dyn := adminClient(t, dir), adminDynamic(t, dir)
	var vip *vipWatch
	if o.managedVIP {
		// The API answers at the VIP once create is done; the test's own
		// client goes to the first master, past whatever this test does
		// to the VIP.
		vip = newVIPWatch(t, dir, apiVIP, masters)
		if err := vip.readyz(); err != nil {
			t.Errorf("the API at its VIP %s after create: %v", apiVIP, err)
		}
		rc := adminConfigVia(t, dir, masters[0].Address)
		client, dyn = kubernetes.NewForConfigOrDie(rc), dynamic.NewForConfigOrDie(rc)
	}
	// The hosts' names, the bootstrap host's only as the worker it joined as.
	assertNodes(ctx, t, client, nodes, "after create")
	if o.bootWorker {
		// Installed as the worker only once the bootstrap host was reset.
		reset, joined := strings.Index(out, "Resetting the bootstrap host "+boot.Name), strings.LastIndex(out, fmt.Sprintf("Installing %d masters and 1 workers", o.masters))
		if reset < 0 || joined < reset || !strings.Contains(out, fmt.Sprintf("Installing %d masters and 0 workers", o.masters)) {
			t.Errorf("create cluster did not install the masters, reset the bootstrap host, then install it as the worker:\n%s", lastLines(out, 40))
		}
		// None of the bootstrap's keys outlived its reset: the worker
		// there has the root CA's certificate alone.
		keys := []string{nodelayout.PKIDir + "/ca.key", nodelayout.PKIDir + "/kubelet-serving-ca.key", nodelayout.PKIDir + "/sa.key",
			nodelayout.EtcdPKIDir + "/ca.key", nodelayout.MCSConfigDir + "/tls.key"}
		script := "for f in " + strings.Join(keys, " ") + `; do [ ! -e "$f" ] || echo "$f"; done; [ -e ` + nodelayout.PKIDir + "/ca.crt ] || echo no ca.crt"
		if left, err := f.Client.RunScript(ctx, boot.Address, script); err != nil || len(left) > 0 {
			t.Errorf("the bootstrap host as the worker: %q (%v); want no key of the bootstrap's and the CA certificate", left, err)
		}
	} else if rec, err := footprint.Recorded(ctx, f.Client, boot.Address); err != nil || rec {
		// The bootstrap host was reset: nothing of kiln's is left on it.
		t.Errorf("the bootstrap host keeps kiln's record after create (%v, %v)", rec, err)
	}
	// No host's API proxy sends to the bootstrap host's control plane.
	assertProxies(ctx, t, f, nodes, masters, "after create")

	// kiln gather bootstrap reads the masters' diagnostics over SSH (the
	// bootstrap host is reset by now).
	if out, err := runKiln(t, kiln, 5*time.Minute, "gather", "bootstrap", "--dir", dir); err != nil {
		t.Errorf("gather bootstrap: %v\n%s", err, lastLines(out, 20))
	} else {
		bundles, _ := filepath.Glob(filepath.Join(dir, "log-bundle-*.tar.gz"))
		list, err := exec.Command("tar", append([]string{"-tzf"}, bundles...)...).CombinedOutput()
		for _, m := range masters {
			if err != nil || !strings.Contains(string(list), m.Name+"/journal.log") {
				t.Errorf("the log bundle %q lacks %s/journal.log (%v): %s", bundles, m.Name, err, list)
			}
		}
	}

	if o.upgradeFrom != "" {
		upgradeSSHCluster(ctx, t, kiln, dir, f, client, installed[1:], o.upgradeFrom)
	}
	if o.lan {
		// Installed only once synchronised with the LAN's time server.
		assertTimeSynced(ctx, t, f, nodes, lanAddr)
		assertLAN(ctx, t, client, []sshHost{masters[0], worker}, lanAddr)
	}
	// The add-ons, on by default as on local: a claim without a class
	// keeps a file across pods on its host's disk; kubectl top answers.
	t.Run("storage", func(t *testing.T) { assertStorage(t, client, f.m.Exec) })
	t.Run("metrics", func(t *testing.T) { assertMetrics(t, client, kilnKubectl(kiln, dir)) })
	// A volume in use is kept through stop, start and reboots, and goes
	// with its host's reset at destroy (the snapshot below).
	var kept *storageProbe
	if o.restart {
		p := startStorageProbe(ctx, t, client, "kept-volume")
		kept = &p
	}
	if o.networkType == "KilnVXLAN" {
		// Everything below runs with the worker's host on a second L2
		// segment behind a router: only the overlay's traffic, node to
		// node, can cross.
		var ms []segmentNode
		for _, m := range masters {
			ms = append(ms, segmentNode{m.Name, m.Address})
		}
		splitSegments(ctx, t, client, f.m, subnet+"0/24", ms, []segmentNode{{worker.Name, worker.Address}})
	}
	// A Service across hosts: the server on the last master, the client on
	// the worker.
	assertPodNetwork(ctx, t, client, masters[len(masters)-1].Name, worker.Name)
	if o.networkType == "KilnVXLAN" {
		assertOverlayRoutes(ctx, t, client, f.m.Exec)
	}
	if o.loadBalancer {
		pool := [2]netip.Addr{netip.MustParseAddr(fmt.Sprint(subnet, sshLBPool[0])), netip.MustParseAddr(fmt.Sprint(subnet, sshLBPool[1]))}
		assertSSHLoadBalancer(ctx, t, f, client, dyn, pool, masters[0].Name)
	}
	if o.upgradeFrom != "" {
		// A worker host added after the upgrade boots straight into the
		// new release: its extension, never the one the cluster was
		// created with, and its agent is never asked for a release. Its
		// pods reach the Service assertPodNetwork made.
		joiner, joined := f.Hosts[2+o.masters], time.Now()
		replaceSSHWorker(ctx, t, kiln, dir, f, masters, worker, joiner)
		assertBootedRelease(ctx, t, client, f, joiner, joined, release.Default().Kubernetes)
		worker = joiner
		nodes = append(slices.Clone(masters), worker)
	}
	if o.restart {
		restartSSHCluster(ctx, t, kiln, dir, f, client, nodes, masters[0], worker.Name, masters[len(masters)-1].Name)
		if vip != nil {
			// start cluster waited through the masters, and for the VIP.
			if err := vip.readyz(); err != nil {
				t.Errorf("the API at its VIP %s after start cluster: %v", apiVIP, err)
			}
		}
		// kiln certs renew over SSH, as on local.
		var addrs []string
		for _, m := range masters {
			addrs = append(addrs, m.Address)
		}
		assertRenew(t, kiln, dir, addrs)
	}

	if o.masters > 1 {
		// A master's host stops: the API serves on, to the hosts through
		// their proxies and to the user at the API VIP (the first master,
		// or with managedVIP the VIP, which moves off the stopped master:
		// stopVIPMaster).
		stopped := masters[1]
		var vipBack func()
		if o.managedVIP {
			stopped, vipBack = stopVIPMaster(ctx, t, f, client, dyn, vip, kilnKubectl(kiln, dir), masters)
		} else if err := f.m.Stop(ctx, stopped.Name); err != nil {
			t.Fatalf("stopping %s: %v", stopped.Name, err)
		}
		for _, h := range []sshHost{worker, masters[0]} {
			waitFor(t, ctx, 2*time.Minute, h.Name+"'s proxy to pass API requests with "+stopped.Name+" stopped", func() (bool, string) {
				out, err := f.Client.RunScript(ctx, h.Address, "kubectl --kubeconfig /var/lib/kubelet/kubeconfig get --raw /readyz 2>&1")
				return err == nil && string(out) == "ok", fmt.Sprintf("%s %v", out, err)
			})
		}
		for range 5 {
			if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("the API at the VIP with %s stopped: %v", stopped.Name, err)
			}
		}
		started := time.Now()
		f.start(ctx, t, stopped.Name)
		// Back before the next master goes: etcd needs two of three.
		waitNodeReadySince(ctx, t, client, stopped.Name, started, "after its host started again")
		t.Logf("MEASURE %s's host started again: Node Ready after %s", stopped.Name, time.Since(started).Round(time.Second))
		if vipBack != nil {
			vipBack()
		}
	}

	// The first master's host reboots: systemd-sysext merges the payload
	// again at boot, and the units Ignition enabled bring the node back.
	rebooted := time.Now()
	f.reboot(ctx, t, masters[0].Name)
	waitNodeReadySince(ctx, t, client, masters[0].Name, rebooted, "after its host rebooted")
	t.Logf("MEASURE %s's host rebooted: Node Ready again after %s", masters[0].Name, time.Since(rebooted).Round(time.Second))

	if o.dayTwo && o.masters > 1 {
		scaleSSHCluster(ctx, t, kiln, dir, f, masters, worker, f.Hosts[2+o.masters])
		// Last before the destroy, which must then give back hosts whose
		// etcd was restored, the old data kept aside included.
		restoreSSHCluster(ctx, t, kiln, dir, f, client, masters, len(nodes))
	}

	if kept != nil {
		kept.assertOnNode(ctx, t, f.m.Exec)
	}
	if o.restart {
		// A MachineConfig replaces a file of the worker's host and adds
		// one: the destroy's reset must give the host back as it was.
		assertHostMachineConfig(ctx, t, dyn, f.m.Exec, []string{worker.Name})
	}

	infraID := readInfraID(t, dir)
	start = time.Now()
	out, err = runKiln(t, kiln, 15*time.Minute, "destroy", "cluster", "--dir", dir)
	destroyed = true
	if err != nil {
		t.Fatalf("destroy cluster: %v\n%s", err, lastLines(out, 40))
	}
	t.Logf("MEASURE destroy cluster (%d hosts reset): %s", len(nodes), time.Since(start).Round(time.Second))
	if cache, err := platforms.CacheDir(os.Getenv); err == nil {
		payloads := filepath.Join(cache, "ssh-payloads", infraID)
		if _, err := os.Stat(payloads); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the cluster's node payload %s is left in the cache (%v)", payloads, err)
		}
	}
	for _, h := range f.Hosts {
		if err := footprint.Reset(ctx, f.Client, h.Address); err != nil {
			t.Errorf("a second reset of %s: %v", h.Name, err)
		}
	}
	assertHostsAsBefore(t, f, before, "the hosts after destroy differ from before the install")
	if o.lan {
		assertTimeGivenBack(ctx, t, f, f.Hosts, lanAddr)
	}
}

// scaleSSHCluster is TestSSHCluster's day 2: the host joiner joins as a
// worker in worker's place (kiln show install-config, its hosts edited,
// as kiln scale cluster --config), and worker is reset; a Service answers
// on the new worker; then the last master is replaced (its etcd member
// and host reset, the host installed and joined again). Every host's API
// proxy lists exactly the masters after each.
func scaleSSHCluster(ctx context.Context, t *testing.T, kiln, dir string, f *sshFleet, masters []sshHost, worker, joiner sshHost) {
	t.Helper()
	client := replaceSSHWorker(ctx, t, kiln, dir, f, masters, worker, joiner)
	replaced := masters[len(masters)-1]
	start := time.Now()
	out, err := runKiln(t, kiln, 30*time.Minute, "scale", "cluster", "--dir", dir, "--replace", replaced.Name, "--yes")
	if err != nil {
		t.Fatalf("scale cluster --replace %s: %v\n%s", replaced.Name, err, lastLines(out, 40))
	}
	t.Logf("MEASURE scale cluster --replace %s: %s", replaced.Name, time.Since(start).Round(time.Second))
	assertOutput(t, "scale cluster --replace", out, "~ replace master "+replaced.Name, "Scale complete: 3 masters, 1 workers")
	waitNodeReadySince(ctx, t, client, replaced.Name, start, "after its replacement")
	assertProxies(ctx, t, f, append(slices.Clone(masters), joiner), masters, "after the master's replacement")
}

// replaceSSHWorker has the host joiner join as a worker in worker's place
// (kiln show install-config, its hosts edited, as kiln scale cluster
// --config), and worker reset; a Service answers on the new worker, and
// every host's API proxy lists exactly the masters. It returns the admin
// client.
func replaceSSHWorker(ctx context.Context, t *testing.T, kiln, dir string, f *sshFleet, masters []sshHost, worker, joiner sshHost) kubernetes.Interface {
	t.Helper()
	show := exec.CommandContext(ctx, kiln, "show", "install-config", "--dir", dir)
	data, err := show.Output()
	if err != nil {
		t.Fatalf("show install-config: %v", err)
	}
	var cfg types.Config
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("show install-config: %v\n%s", err, data)
	}
	for i, h := range cfg.Platform.SSH.Hosts {
		if h.Name == worker.Name {
			cfg.Platform.SSH.Hosts[i] = ssh.Host{Name: joiner.Name, Address: joiner.Address, Role: ssh.RoleWorker}
		}
	}
	if data, err = yaml.Marshal(&cfg); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "install-config.yaml")
	if err := os.WriteFile(edited, data, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := runKiln(t, kiln, 20*time.Minute, "scale", "cluster", "--dir", dir, "--config", edited, "--yes")
	if err != nil {
		t.Fatalf("scale cluster --config (%s in %s's place): %v\n%s", joiner.Name, worker.Name, err, lastLines(out, 40))
	}
	t.Logf("MEASURE scale cluster: worker %s added, %s removed: %s", joiner.Name, worker.Name, time.Since(start).Round(time.Second))
	assertOutput(t, "scale cluster", out, "+ worker "+joiner.Name, "- worker "+worker.Name, "Checking 1 hosts over SSH", fmt.Sprintf("Scale complete: %d masters, 1 workers", len(masters)))
	client := adminClient(t, dir)
	assertNodes(ctx, t, client, append(slices.Clone(masters), joiner), "after the scale")
	if rec, err := footprint.Recorded(ctx, f.Client, worker.Address); err != nil || rec {
		t.Errorf("the removed worker's host keeps kiln's record (%v, %v)", rec, err)
	}
	if shown, err := exec.CommandContext(ctx, kiln, "show", "install-config", "--dir", dir).Output(); err != nil ||
		!strings.Contains(string(shown), joiner.Name) || strings.Contains(string(shown), worker.Name) {
		t.Errorf("show install-config after the scale lists the hosts before it (%v):\n%s", err, shown)
	}
	assertProbeClient(ctx, t, client, "probe-client-joined", joiner.Name, masters[len(masters)-1].Name)
	assertProxies(ctx, t, f, append(slices.Clone(masters), joiner), masters, "after the worker scale")
	return client
}

// restoreSSHCluster is kiln restore cluster over SSH: restoreObjects
// ConfigMaps are written, backed up (kiln backup cluster) and deleted; two
// of the three masters lose etcd's data and their etcd is killed; the
// restore brings the ConfigMaps back on the masters as etcd's voters,
// with nodes nodes Ready.
func restoreSSHCluster(ctx context.Context, t *testing.T, kiln, dir string, f *sshFleet, client kubernetes.Interface, masters []sshHost, nodes int) {
	t.Helper()
	var names []string
	for _, m := range masters {
		names = append(names, m.Name)
	}
	const ns = "e2e-restore"
	writeConfigMaps(ctx, t, client, ns)
	archive := filepath.Join(t.TempDir(), "ssh.tar.gz")
	if out, err := runKiln(t, kiln, 5*time.Minute, "backup", "cluster", "--dir", dir, "--to", archive); err != nil {
		t.Fatalf("backup cluster: %v\n%s", err, out)
	}
	deleteConfigMaps(ctx, t, client, ns)
	loseEtcdQuorum(ctx, t, client, f.m.Exec, names[1:])
	start := time.Now()
	out, err := runKiln(t, kiln, 20*time.Minute, "restore", "cluster", "--dir", dir, "--from", archive)
	if err != nil {
		t.Fatalf("restore cluster: %v\n%s", err, lastLines(out, 60))
	}
	t.Logf("MEASURE restore cluster over SSH (3 masters, to every node Ready): %s\n%s", time.Since(start).Round(time.Second), lastLines(out, 12))
	assertRestored(ctx, t, client, f.m.Exec, out, ns, names, nodes)
	// No etcdctl on an ssh host (etcd runs from its image): etcd's
	// members are asked from here, as kiln dials etcd from the host, with
	// the API server's etcd client certificate from --dir's state.
	ca, cert, key, err := etcdmembers.ClientPKIFromState(dir)
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := etcdmembers.DialPEM([]string{etcdmembers.ClientURL(masters[0].Address)}, ca, cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	list, err := etcd.MemberList(ctx)
	if err != nil {
		t.Fatalf("etcd's members: %v", err)
	}
	var got []string
	for _, m := range list.Members {
		got = append(got, fmt.Sprintf("%s learner=%v", m.Name, m.IsLearner))
	}
	wantVoters(t, got, names)
}

// assertOutput checks that the output out of the command what holds
// each of wants.
func assertOutput(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s output lacks %q:\n%s", what, want, lastLines(out, 40))
		}
	}
}

// assertNodes checks that the cluster's Nodes are exactly hosts (in any
// order), all Ready.
func assertNodes(ctx context.Context, t *testing.T, client kubernetes.Interface, hosts []sshHost, when string) {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, n := range nodes.Items {
		got = append(got, fmt.Sprintf("%s ready=%v", n.Name, nodeReady(&n)))
	}
	for _, h := range hosts {
		want = append(want, h.Name+" ready=true")
	}
	slices.Sort(want) // the API lists Nodes by name
	if !slices.Equal(got, want) {
		t.Errorf("nodes %s %q, want %q", when, got, want)
	}
}

// assertProxies checks that the API proxy of each of hosts lists exactly
// the masters' API servers.
func assertProxies(ctx context.Context, t *testing.T, f *sshFleet, hosts, masters []sshHost, when string) {
	t.Helper()
	var want []string
	for _, m := range masters {
		want = append(want, m.Address+":6443")
	}
	for _, h := range hosts {
		out, err := f.Client.RunScript(ctx, h.Address, "cat "+footprint.APIProxyConfigFile)
		if err != nil {
			t.Errorf("%s's API proxy configuration %s: %v", h.Name, when, err)
			continue
		}
		var cfg lb.Config
		if err := json.Unmarshal(out, &cfg); err != nil || len(cfg.Services) == 0 || !slices.Equal(cfg.Services[0].Backends, want) {
			t.Errorf("%s's API proxy configuration %s (%v): %s; want the API backends %q", h.Name, when, err, out, want)
		}
	}
}

// waitNodeReadySince waits until node is Ready as posted by a kubelet
// heartbeat after since (a kubelet that started after its host did).
func waitNodeReadySince(ctx context.Context, t *testing.T, client kubernetes.Interface, node string, since time.Time, what string) {
	t.Helper()
	waitFor(t, ctx, 10*time.Minute, node+"'s Node Ready "+what, func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.Time.After(since) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", n.Status.Conditions)
	})
}

// diagnoseCSRs lists the cluster's certificate signing requests, each with
// its requester and conditions, and the last lines of the in-cluster CSR
// approver's log, which says why it left one pending: a node without a
// serving certificate is one whose CSR was never approved.
func diagnoseCSRs(dir string) string {
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "auth", "kubeconfig"))
	if err != nil {
		return "== CSRs: " + err.Error() + "\n"
	}
	rc.Dial = clusterDial
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "== CSRs: " + err.Error() + "\n"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	fmt.Fprintf(&b, "== CSRs (%v)\n", err)
	if err == nil {
		for _, c := range csrs.Items {
			var conds []string
			for _, cond := range c.Status.Conditions {
				conds = append(conds, string(cond.Type)+": "+cond.Message)
			}
			fmt.Fprintf(&b, "%s %s %s %s [%s] certificate: %d bytes\n", c.Name, c.CreationTimestamp.Format(time.TimeOnly), c.Spec.SignerName, c.Spec.Username, strings.Join(conds, "; "), len(c.Status.Certificate))
		}
	}
	pods, err := client.CoreV1().Pods("kiln-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return b.String() + "== approver pods: " + err.Error() + "\n"
	}
	for _, p := range pods.Items {
		if !strings.Contains(p.Name, "csr-approver") {
			continue
		}
		tail := int64(40)
		logs, err := client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
		fmt.Fprintf(&b, "== %s on %s (%v)\n%s\n", p.Name, p.Spec.NodeName, err, logs)
	}
	return b.String()
}
