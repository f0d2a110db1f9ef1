package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
)

// sshMasters is the number of masters of TestSSHCluster.
const sshMasters = 3

// TestSSHCluster installs a cluster onto plain Debian 12 test hosts (a
// bootstrap host, sshMasters masters and a worker; systemd-nspawn
// containers with sshd on a bridge, never kiln's node image) with
// `kiln create cluster` on the ssh platform: preflight over SSH, the node
// payload, the ssh platform's Terraform stages through kiln's kilnssh
// provider, the bootstrap host's control plane handing over to the masters
// and reset, every host reaching the API through its own proxy. Then a
// Service answers across hosts; a master's host stops and the API still
// serves, to the other hosts through their proxies and to the user at the
// API VIP; the first master's host reboots and its Node is Ready again;
// `kiln destroy cluster` resets every host, and each one's files, units,
// processes, interfaces, rules, routes and mounts equal a snapshot taken
// before the install.
func TestSSHCluster(t *testing.T) {
	requireMachineHost(t, "debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	kiln := buildStaticKiln(t)
	names := []string{"e2essh-boot"}
	for i := range sshMasters {
		names = append(names, fmt.Sprintf("e2essh-master-%d", i))
	}
	names = append(names, "e2essh-worker-0")
	f := startSSHHosts(t, 12, names, nil)
	boot, masters, worker := f.Hosts[0], f.Hosts[1:1+sshMasters], f.Hosts[1+sshMasters]

	dir := t.TempDir()
	subnet := boot.Address[:strings.LastIndex(boot.Address, ".")+1]
	var hosts strings.Builder
	for i, h := range f.Hosts {
		role := "master"
		switch {
		case i == 0:
			role = "bootstrap"
		case h == worker:
			role = "worker"
		}
		fmt.Fprintf(&hosts, "    - {name: %s, address: %s, role: %s}\n", h.Name, h.Address, role)
	}
	cfg := fmt.Sprintf(`apiVersion: kiln.dev/v1
baseDomain: e2e.example.com
metadata:
  name: sshe2e
controlPlane:
  name: master
  replicas: %d
controlPlaneHardwareSpeed: %s
compute:
- name: worker
  replicas: 1
networking:
  machineNetwork:
  - cidr: %s0/24
platform:
  ssh:
    identityFile: %s
    knownHostsFile: %s
    apiVIP: %s
    hosts:
%s`, sshMasters, map[bool]string{true: "Slower", false: "Standard"}[sshMasters > 1], subnet, f.KeyFile, f.KnownHosts, masters[0].Address, hosts.String())
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshotHosts(t, f)
	diagnose := func() string {
		var b strings.Builder
		for _, h := range f.Hosts {
			out, _ := f.Client.RunScript(context.Background(), h.Address, `systemctl --no-pager --failed
for u in kiln-api-proxy kiln-ignition kubelet bootkube kiln-etcd-member; do echo "== $u"; journalctl --no-pager -n 8 -u $u.service; done`)
			b.WriteString("== host " + h.Name + "\n" + string(out))
		}
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
	t.Logf("MEASURE create cluster on %d ssh hosts (1 bootstrap, %d masters, 1 worker): %s", len(f.Hosts), sshMasters, time.Since(start).Round(time.Second))
	for _, want := range []string{"Checking " + fmt.Sprint(len(f.Hosts)) + " hosts over SSH", "Install complete!", "Time elapsed:"} {
		if !strings.Contains(out, want) {
			t.Errorf("create cluster output lacks %q:\n%s", want, lastLines(out, 40))
		}
	}
	client := adminClient(t, dir)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes.Items {
		got = append(got, fmt.Sprintf("%s ready=%v", n.Name, nodeReady(&n)))
	}
	var want []string
	for _, h := range f.Hosts[1:] {
		want = append(want, h.Name+" ready=true")
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("nodes %q, want %q (the hosts' names, the bootstrap host gone)", got, want)
	}
	// The bootstrap host was reset: nothing of kiln's is left on it, and
	// no host's API proxy sends to it any more.
	if rec, err := footprint.Recorded(ctx, f.Client, boot.Address); err != nil || rec {
		t.Errorf("the bootstrap host keeps kiln's record after create (%v, %v)", rec, err)
	}
	for _, h := range f.Hosts[1:] {
		out, err := f.Client.RunScript(ctx, h.Address, "cat "+footprint.APIProxyConfigFile)
		if err != nil || strings.Contains(string(out), boot.Address+":") || !strings.Contains(string(out), masters[0].Address+":6443") {
			t.Errorf("%s's API proxy configuration after create (%v): %s", h.Name, err, out)
		}
	}

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

	// A Service across hosts: the server on the last master, the client on
	// the worker.
	assertPodNetwork(ctx, t, client, masters[len(masters)-1].Name, worker.Name)

	if sshMasters > 1 {
		// A master's host stops: the API serves on, to the hosts through
		// their proxies and to the user at the API VIP (the first master).
		stopped := masters[1]
		if err := f.m.Stop(ctx, stopped.Name); err != nil {
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
	}

	// The first master's host reboots: systemd-sysext merges the payload
	// again at boot, and the units Ignition enabled bring the node back.
	rebooted := time.Now()
	f.reboot(ctx, t, masters[0].Name)
	waitNodeReadySince(ctx, t, client, masters[0].Name, rebooted, "after its host rebooted")
	t.Logf("MEASURE %s's host rebooted: Node Ready again after %s", masters[0].Name, time.Since(rebooted).Round(time.Second))

	infraID := readInfraID(t, dir)
	start = time.Now()
	out, err = runKiln(t, kiln, 15*time.Minute, "destroy", "cluster", "--dir", dir)
	destroyed = true
	if err != nil {
		t.Fatalf("destroy cluster: %v\n%s", err, lastLines(out, 40))
	}
	t.Logf("MEASURE destroy cluster (%d hosts reset): %s", len(f.Hosts)-1, time.Since(start).Round(time.Second))
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
	if after := snapshotHosts(t, f); after != before {
		t.Errorf("the hosts after destroy differ from before the install:\n%s", lineDiff(before, after))
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
