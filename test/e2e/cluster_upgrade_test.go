package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// TestClusterUpgrade creates 3 masters + 2 workers at the older release,
// runs two echo pods behind a NodePort Service (a PodDisruptionBudget keeps
// one) probed every second and writes a ConfigMap every second, then:
//
//   - `kiln upgrade cluster --plan` prints the plan and changes nothing;
//   - with a flag the older API server accepts and the newer refuses added
//     to the first master's manifest, the upgrade, killed (SIGKILL) 3 s
//     into its second etcd step and run again, resumes that step, takes
//     etcd from 3.5 to 3.6 member by member, then fails its first API
//     server change, rolls it back on that master and reports the API
//     server's own error; with the flag removed the upgrade goes on;
//   - the upgrade, killed (SIGKILL) 3 s into its first kubelet step, and
//     run again, completes: every node's kubelet, every control-plane pod
//     and kube-proxy run the default release, the API server reports it,
//     etcd keeps its 3 members, each runs the new etcd and etcd's cluster
//     version is its minor, and the journal is gone; its last step renewed
//     every certificate the masters serve (as kubeadm upgrade apply does);
//   - a last plan has nothing to do;
//   - the upstream conformance subset of the new release passes;
//   - a master replaced and a worker added after the upgrade (kiln scale
//     cluster --replace --workers) boot straight into the new release (its
//     node image, its control plane and etcd): their kubelets register at
//     it, their agents are never asked for a release, and a plan after
//     them has nothing to do.
//
// It takes about 28 min, more than make test's hour leaves: make test
// says SKIP, and make test-all runs it (building the older release's node
// image when it is not cached). Each node's changes are made by its
// machine-config agent (docs/machine-config.md, "Upgrades").
func TestClusterUpgrade(t *testing.T) {
	requireMachineHost(t)
	if os.Getenv("KILN_E2E_CLUSTER") == "0" {
		t.Skip("KILN_E2E_CLUSTER=0")
	}
	requireAll(t, "TestClusterUpgrade (v1.35.4 → v1.36.3, 3 + 2)", "about 28 min (docs/benchmarks.md), more than make test's hour leaves")
	from := requireCachedRelease(t, "TestClusterUpgrade (v1.35.4 → v1.36.3)", olderRelease)
	to := release.Default()
	kiln := buildStaticKiln(t)
	dir := t.TempDir()
	const machineCIDR = "10.66.105.0/24"
	writeInstallConfig(t, dir, "e2eupg", 3, 2, machineCIDR, "")
	appendInstallConfig(t, dir, "kubernetesVersion: "+from.Kubernetes+"\n")
	_, infraID := createCluster(t, kiln, dir)
	client := adminClient(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()

	createScaleEcho(ctx, t, client)
	mon := startMonitor(ctx, t, client, fmt.Sprintf("http://10.66.105.11:%d/", scaleNodePort))
	defer mon.stop()

	out, err := runKiln(t, kiln, 5*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--plan")
	if err != nil || !strings.Contains(out, "kiln will upgrade the cluster from "+from.Kubernetes+" to "+to.Kubernetes) {
		t.Fatalf("upgrade --plan: %v\n%s", err, out)
	}
	t.Logf("the plan:\n%s", out)
	assertKubelets(ctx, t, client, from.Kubernetes)

	// An injected failure, as an upgrade meets one: the first master's API
	// server manifest gets a flag its release accepts and the target
	// refuses (a feature gate locked on in v1.36). kiln must upgrade etcd
	// (the plan's first steps, one member at a time), then roll that
	// master's API server back, stop, and say why.
	first := regexp.MustCompile(`(?m)^\s+\d+\s+([a-z0-9-]+-master-\d)\s+kube-apiserver`).FindStringSubmatch(out)
	if first == nil {
		t.Fatalf("no API server step in the plan:\n%s", out)
	}
	etcdStep := regexp.MustCompile(`etcd\s+` + regexp.QuoteMeta(strings.TrimPrefix(from.Etcd, "v")+" → "+strings.TrimPrefix(to.Etcd, "v")))
	if from.Etcd != to.Etcd && !etcdStep.MatchString(out) {
		t.Errorf("the plan has no etcd step from %s to %s:\n%s", from.Etcd, to.Etcd, out)
	}
	mgr := machine.NewManager(machine.Options{})
	setBrokenFlag(ctx, t, mgr, client, first[1], true)
	// Killed 3 s into the second etcd step (its member's image import or
	// restart, its API server out of the load balancer), the next run
	// resumes that step before it goes on.
	second := regexp.MustCompile(`(?m)^\s+2\s+([a-z0-9-]+-master-\d)\s+etcd\s`).FindStringSubmatch(out)
	if from.Etcd != to.Etcd && second == nil {
		t.Fatalf("the plan's second step is no etcd step:\n%s", out)
	}
	if second != nil {
		mon.begin("upgrade, killed during an etcd step")
		killed, _ := signalAt(t, kiln, "] "+second[1]+": etcd ", 3*time.Second, syscall.SIGKILL,
			"upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--yes", "--step-timeout", "2m")
		mon.end(killed)
	}
	mon.begin("a change that fails its gate, rolled back")
	out, err = runKiln(t, kiln, 20*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--yes", "--step-timeout", "2m")
	mon.end(out)
	if second != nil && !strings.Contains(out, "Resuming "+second[1]+": etcd ") {
		t.Errorf("the run after the kill does not resume %s's etcd step:\n%s", second[1], lastLines(out, 40))
	}
	rolled := regexp.MustCompile(`([a-z0-9-]+-master-\d): kube-apiserver ` + regexp.QuoteMeta(to.Kubernetes) + ` failed: .*rolled back to ` +
		regexp.QuoteMeta(from.Kubernetes) + ` on ([a-z0-9-]+-master-\d), and the upgrade stopped`).FindStringSubmatch(out)
	if err == nil || rolled == nil || rolled[1] != first[1] || rolled[2] != first[1] {
		diagnose(ctx, t, kiln, dir, client)
		t.Fatalf("want %s's API server change rolled back and reported: %v\n%s", first[1], err, lastLines(out, 30))
	}
	// The error names the last error the gate saw: the API server's own.
	if line := regexp.MustCompile(`(?m)^.*rolled back to .*$`).FindString(out); !strings.Contains(line, brokenFlagError) {
		t.Errorf("the failure does not say why (%q):\n%s", brokenFlagError, lastLines(out, 10))
	}
	steps := regexp.MustCompile(`(?m)^\[\d+/\d+\] .*$`).FindAllString(out, -1)
	t.Logf("MEASURE injected failure, its run's steps:\n%s\n%s", strings.Join(steps, "\n"), lastLines(out, 1))
	pod, err := client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-"+rolled[1], metav1.GetOptions{})
	if err != nil || pod.Spec.Containers[0].Image != from.Image(release.KubeAPIServer) {
		t.Errorf("after the rollback %s's API server pod is %v (%v), want %s", rolled[1], pod, err, from.Image(release.KubeAPIServer))
	}
	// The user fixes the manifest; the upgrade then goes through.
	setBrokenFlag(ctx, t, mgr, client, first[1], false)
	snaps, _ := filepath.Glob(filepath.Join(dir, "upgrade", "etcd-"+from.Kubernetes+"-*.db"))
	if len(snaps) != 1 {
		t.Fatalf("etcd snapshots in %s/upgrade: %q, want one", dir, snaps)
	}
	if st, err := os.Stat(snaps[0]); err != nil || st.Mode().Perm() != 0o600 || st.Size() < 1<<20 {
		t.Errorf("snapshot %s: %v, %v; want 0600 and at least 1 MiB", snaps[0], st, err)
	}

	masters := localMasters(t, infraID, machineCIDR, 3)
	before := servedCerts(t, masters)
	// The upgrade, killed in its first kubelet step, then run again.
	mon.begin("upgrade, killed during a kubelet step")
	start := time.Now()
	// 3 s into the step: its drain, image imports or kubelet restart.
	killed, _ := signalAt(t, kiln, ": kubelet "+from.Kubernetes+" → ", 3*time.Second, syscall.SIGKILL,
		"upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--yes")
	mon.end(killed)
	mon.begin("upgrade, resumed")
	out, err = runKiln(t, kiln, 30*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--yes")
	mon.end(out)
	if err != nil || !strings.Contains(out, "Upgrade complete: "+to.Kubernetes) {
		diagnose(ctx, t, kiln, dir, client)
		t.Fatalf("the resumed upgrade: %v\n%s", err, lastLines(out, 40))
	}
	// As kubeadm's, the upgrade renewed every certificate the masters
	// serve, and --dir's.
	assertOutput(t, "upgrade cluster", out, "Renewal complete: ")
	after := servedCerts(t, masters)
	for addr, c := range before {
		if n := after[addr]; n == nil || n.SerialNumber.Cmp(c.SerialNumber) == 0 {
			t.Errorf("%s serves the certificate of before the upgrade (serial %x)", addr, c.SerialNumber)
		}
	}
	assertRenewedDir(t, kiln, dir, after)
	t.Logf("MEASURE upgrade 3+2 %s → %s: %s including the kill and the resume\n%s", from.Kubernetes, to.Kubernetes,
		time.Since(start).Round(time.Second), out)
	mon.stop()
	// A write or a probe may meet an API server or a kube-proxy the moment
	// it restarts; a few seconds of it at most.
	mon.check(t, func(string) int { return 5 })

	assertRunsRelease(ctx, t, client, to)
	assertEtcdMembers(t, infraID, 3)
	assertEtcdRuns(ctx, t, infraID, nodeAddresses(ctx, t, client)[infraID+"-master-0"], to)
	if _, err := os.Stat(filepath.Join(dir, ".kiln", "upgrade.json")); !os.IsNotExist(err) {
		t.Errorf("the journal outlived the upgrade: %v", err)
	}
	out, err = runKiln(t, kiln, 5*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--plan")
	if err != nil || !strings.Contains(out, "Nothing to upgrade") {
		t.Errorf("a last plan: %v\n%s", err, out)
	}
	// The upgraded cluster is a cluster of the new release: the upstream
	// conformance subset of that release passes on it, as on a new one.
	runConformanceSubset(t, kiln, dir)

	// A master replaced and a worker added after the upgrade boot the
	// release the cluster runs, not the one it was created with: the
	// master's etcd must be the members' (once etcd's cluster version is
	// 3.6, a 3.5 member cannot join), its API server must not be older
	// than the kubelets, and kube-proxy's new image must be on both.
	replaced := infraID + "-master-2"
	start = time.Now()
	out, err = runKiln(t, kiln, 30*time.Minute, "scale", "cluster", "--dir", dir, "--replace", replaced, "--workers", "3", "--yes")
	if err != nil {
		diagnose(ctx, t, kiln, dir, client)
		t.Fatalf("replacing %s and adding a worker after the upgrade: %v\n%s", replaced, err, lastLines(out, 40))
	}
	t.Logf("MEASURE replace a master and add a worker after the upgrade: %s", time.Since(start).Round(time.Second))
	assertRunsRelease(ctx, t, client, to)
	assertBootedStraight(ctx, t, client, start, to.Kubernetes, 2)
	assertEtcdMembers(t, infraID, 3)
	assertEtcdRuns(ctx, t, infraID, nodeAddresses(ctx, t, client)[infraID+"-master-0"], to)
	out, err = runKiln(t, kiln, 5*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--plan")
	if err != nil || !strings.Contains(out, "Nothing to upgrade") {
		t.Errorf("a plan after the scale: %v\n%s", err, out)
	}
}

// assertRunsRelease checks that the cluster runs to on every node: every
// kubelet, every control-plane pod and kube-proxy, and the API server says
// so; and that the echo Service's NodePort answers new connections on
// every node (each node's kube-proxy runs r's image).
func assertRunsRelease(ctx context.Context, t *testing.T, client kubernetes.Interface, to release.Release) {
	t.Helper()
	assertKubelets(ctx, t, client, to.Kubernetes)
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		c := release.Component(p.Labels["component"])
		if want := to.Image(c); p.Spec.Containers[0].Image != want {
			t.Errorf("%s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, want)
		}
	}
	if sv, err := client.Discovery().ServerVersion(); err != nil || sv.GitVersion != to.Kubernetes {
		t.Errorf("API server version %v (%v), want %s", sv, err, to.Kubernetes)
	}
	ds, err := client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil || ds.Spec.Template.Spec.Containers[0].Image != to.Image(release.KubeProxy) {
		t.Errorf("kube-proxy: %v", err)
	}
	get := nodePortGetter(strconv.Itoa(scaleNodePort), "echo")
	for node, ip := range nodeAddresses(ctx, t, client) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := waitNodePort(wctx, get, ip); err != nil {
			t.Errorf("the echo Service's NodePort on %s (%s) does not answer: %v", node, ip, err)
		}
		cancel()
	}
}

// diagnose logs what a failed kiln command leaves for its cause to be
// found: the pods that are not Ready or are being deleted, each node's
// Ready condition, and the masters' logs (kiln gather bootstrap, kept in
// $KILN_E2E_ARTIFACTS when set).
func diagnose(ctx context.Context, t *testing.T, kiln, dir string, client kubernetes.Interface) {
	t.Helper()
	var b strings.Builder
	if nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			fmt.Fprintf(&b, "node %s: Ready %v, kubelet %s, unschedulable %v\n", n.Name, nodeReady(&n), n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
	}
	if pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !podutils.IsPodReady(&p) && p.Status.Phase != "Succeeded" {
				fmt.Fprintf(&b, "pod %s/%s on %s: %s, deleting since %v\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp)
			}
		}
	}
	t.Logf("the cluster after the failure:\n%s", b.String())
	gather(t, kiln, dir)
}

// brokenFlag is accepted by v1.35's API server (the gate is beta there)
// and refused by v1.36's, where the gate is GA and locked on; the API
// server's last log line then ends with brokenFlagError.
const (
	brokenFlag      = "--feature-gates=ExternalServiceAccountTokenSigner=false"
	brokenFlagError = "cannot set feature gate ExternalServiceAccountTokenSigner to false, feature is locked to true"
)

// setBrokenFlag edits master's API server manifest, as its admin would:
// brokenFlag added after --allow-privileged when on, removed when not. It
// returns once the API server pod runs the new command and is Ready.
func setBrokenFlag(ctx context.Context, t *testing.T, mgr *machine.Manager, client kubernetes.Interface, master string, on bool) {
	t.Helper()
	const file = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	old, err := mgr.ReadFile(ctx, master, file)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(old), "\n") {
		if strings.Contains(line, brokenFlag) {
			continue
		}
		b.WriteString(line)
		if on && strings.TrimSpace(line) == "- --allow-privileged=true" {
			b.WriteString(strings.Replace(line, "--allow-privileged=true", brokenFlag, 1))
		}
	}
	if on && !strings.Contains(b.String(), brokenFlag) {
		t.Fatalf("%s on %s has no --allow-privileged=true line to add %s after", file, master, brokenFlag)
	}
	err = mgr.WriteFile(ctx, master, file, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		pod, err := client.CoreV1().Pods("kube-system").Get(wctx, "kube-apiserver-"+master, metav1.GetOptions{})
		if err == nil && slices.Contains(pod.Spec.Containers[0].Command, brokenFlag) == on && podutils.IsPodReady(pod) {
			return
		}
		if wctx.Err() != nil {
			t.Fatalf("%s's API server did not come back Ready (%s present: %v): %v", master, brokenFlag, on, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// requireCachedRelease returns the release of version, skipping the test
// with a SKIP line naming it when neither that release's node image nor
// the parts it is assembled from are cached (unless KILN_E2E_RELEASES=1:
// make test-all builds it).
func requireCachedRelease(t *testing.T, test, version string) release.Release {
	t.Helper()
	rel, err := release.Lookup(version)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("KILN_E2E_RELEASES") == "1" {
		return rel
	}
	img, err := nodeimage.Cached(nodeimage.Options{Release: rel})
	if err != nil {
		t.Fatal(err)
	}
	// Built parts are enough: kiln create cluster assembles the image from
	// them in about a minute (after a change to the image's assembly).
	parts, err := nodeimage.PartsCached(nodeimage.Options{Release: rel})
	if err != nil {
		t.Fatal(err)
	}
	if img == nil && !parts {
		t.Skipf("SKIP: %s: the node image of %s is not cached on this machine; "+
			"build it once with `kiln build node-image --kubernetes-version %s` (its Kubernetes build took 28 min here beside a VM run, less on an idle machine) or run make test-all, "+
			"and make test runs this test from then on", test, version, version)
	}
	return rel
}

// assertKubelets checks that every node's kubelet reports version and
// that the node is Ready.
func assertKubelets(ctx context.Context, t *testing.T, client kubernetes.Interface, version string) {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if got := n.Status.NodeInfo.KubeletVersion; got != version || !nodeReady(&n) {
			t.Errorf("node %s: kubelet %s, Ready %v; want %s, Ready", n.Name, got, nodeReady(&n), version)
		}
	}
}

// assertEtcdRuns checks that every etcd member runs r's etcd (etcdctl
// endpoint status on master-0) and that etcd's cluster version is r's
// minor: the leader raises it once every member runs that minor, and the
// members then migrate their storage to it, so the 3.5 → 3.6 hop is
// complete. The cluster version is read as kiln reads it, from master-0's
// /version on its client URL, from the host with the API server's etcd
// client certificate.
func assertEtcdRuns(ctx context.Context, t *testing.T, infraID, masterIP string, r release.Release) {
	t.Helper()
	mgr := machine.NewManager(machine.Options{})
	master := infraID + "-master-0"
	out, err := mgr.Exec(ctx, master, etcdctl("endpoint", "status", "--cluster", "-w", "json")...)
	if err != nil {
		t.Fatalf("etcdctl endpoint status: %v\n%s", err, out)
	}
	var members []struct {
		Endpoint string
		Status   struct {
			Version string `json:"version"`
		}
	}
	if err := json.Unmarshal(out, &members); err != nil || len(members) == 0 {
		t.Fatalf("etcdctl endpoint status: %v\n%s", err, out)
	}
	want := strings.TrimPrefix(r.Etcd, "v")
	for _, m := range members {
		if m.Status.Version != want {
			t.Errorf("etcd member %s runs %s, want %s", m.Endpoint, m.Status.Version, want)
		}
	}
	pem := map[string][]byte{}
	for _, f := range []string{etcdCAFile, etcdClientCert, etcdClientKey} {
		if pem[f], err = mgr.ReadFile(ctx, master, f); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pair, err := tls.X509KeyPair(pem[etcdClientCert], pem[etcdClientKey])
	if err != nil || !pool.AppendCertsFromPEM(pem[etcdCAFile]) {
		t.Fatalf("%s's etcd client certificate: %v", master, err)
	}
	tr := clusterTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	resp, err := hc.Get("https://" + net.JoinHostPort(masterIP, "2379") + "/version")
	if err != nil {
		t.Fatalf("etcd /version on %s: %v", master, err)
	}
	defer resp.Body.Close()
	var v struct {
		Server  string `json:"etcdserver"`
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("etcd /version on %s: %v", master, err)
	}
	major, minor, _ := strings.Cut(want, ".")
	minor, _, _ = strings.Cut(minor, ".")
	if wantCluster := major + "." + minor + ".0"; v.Cluster != wantCluster {
		t.Errorf("etcd's cluster version is %q (server %s), want %s", v.Cluster, v.Server, wantCluster)
	}
	t.Logf("MEASURE etcd after the upgrade: %d members at %s, cluster version %s", len(members), want, v.Cluster)
}

// assertBootedStraight checks that the want Nodes registered since start
// booted release version: each kubelet reports it and no agent was asked
// for a release (no step after the boot changed it).
func assertBootedStraight(ctx context.Context, t *testing.T, client kubernetes.Interface, start time.Time, version string, want int) {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, n := range nodes.Items {
		if n.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			continue
		}
		added = append(added, n.Name)
		if got := n.Status.NodeInfo.KubeletVersion; got != version {
			t.Errorf("%s's kubelet reports %s, want %s", n.Name, got, version)
		}
		if asked, ok := n.Annotations[machineconfig.DesiredReleaseAnnotation]; ok {
			t.Errorf("%s's agent was asked for a release (%s): it did not boot the cluster's", n.Name, asked)
		}
	}
	if len(added) != want {
		t.Errorf("Nodes registered since %s: %v, want %d", start.Format(time.TimeOnly), added, want)
	}
}
