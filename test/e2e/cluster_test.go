package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/metadata"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/provider"
)

// TestClusterHA is the main scenario: 3 masters and 1 worker through
// `kiln create cluster`, checked through the API and the machines, and
// backed up (assertBackup); its masters renew their certificates by themselves, one at a time,
// under a canary writer that sees no error (assertAutoRenew); then a master crash, `kiln stop cluster` and a host reboot, each undone by `kiln
// start cluster` (assertRestart); then `kiln certs renew` renews its certificates one master at a time
// under a canary writer (assertRenew); then two masters lose etcd's data and `kiln restore cluster` brings the
// cluster back from a backup that the cluster took by itself, on install-config's backup schedule, encrypted
// (assertRestore); then `kiln certs rotate-ca` replaces its four CAs under a canary writer (assertRotateCA);
// then `kiln destroy cluster` leaves nothing behind.
// Like every cluster of the suite but TestClusterConnected's it is sealed
// (networking.egress None); TestClusterSingleMaster checks that a pod's
// request out of one fails at once.
//
// This one and TestClusterSingleMaster run in parallel, each on its own
// machine network and infra ID, after the other e2e tests (TestClusterScale
// among them): `go test -parallel 1` runs them one at a time.
func TestClusterHA(t *testing.T) {
	t.Parallel()
	testCluster(t, 3, 1, "10.66.101.0/24", "", false)
}

// TestClusterSingleMaster is the same with one master, and the resilience
// the reference installer lacks: create is interrupted (SIGINT) while it
// waits for bootstrap-complete and exits 130; running it again resumes to
// install-complete; with metadata.json and the state file lost, destroy
// --infra-id still removes everything. Its pod network is the KilnVXLAN
// overlay (the HA cluster has the default KilnBridge), and after create its
// worker is moved to a second L2 segment behind a router (splitLocalSegments):
// pods on different nodes reach each other through the kiln.vxlan tunnel
// across the router. Its certificates last only shortLeafValidity: at the
// end they expire, the API stops, and `kiln certs renew` brings it back
// (assertRenewExpired).
func TestClusterSingleMaster(t *testing.T) {
	t.Parallel()
	testCluster(t, 1, 1, "10.66.102.0/24", "KilnVXLAN", true)
}

// testCluster runs on its own machine network, apart from the default one a
// user's `make cluster` takes; networkType "" is the default.
func testCluster(t *testing.T, masters, workers int, machineCIDR, networkType string, interrupt bool) {
	requireMachineHost(t)
	if os.Getenv("KILN_E2E_CLUSTER") == "0" {
		t.Skip("KILN_E2E_CLUSTER=0")
	}
	kiln := buildStaticKiln(t)
	dir := t.TempDir()
	name := fmt.Sprintf("e2e%d%d", masters, workers)
	writeInstallConfig(t, dir, name, masters, workers, machineCIDR, networkType)
	if masters == 1 {
		// Its certificates expire during the test (assertRenewExpired).
		withShortLeafValidity(t, dir)
	} else {
		// Its masters renew their certificates soon after create.
		withAutoRenewal(t, dir)
	}
	var key backupKey
	if masters == 3 {
		// It backs itself up, encrypted (takeScheduledBackup).
		key = newBackupKey(t, kiln)
		withBackupSchedule(t, dir, key.public)
	}

	addUserManifest(t, kiln, dir)

	start := time.Now()
	probe := startConfigProbe(t, dir)
	if interrupt {
		interruptCreate(t, kiln, dir, "Waiting up to 30m0s for bootstrapping to complete")
	}
	out, err := runKiln(t, kiln, 45*time.Minute, "create", "cluster", "--dir", dir)
	infraID := readInfraID(t, dir)
	t.Cleanup(func() {
		if interrupt {
			// Lose what names the cluster: destroy must find it by its infra ID.
			os.Remove(filepath.Join(dir, installdir.Metadata))
			os.Remove(filepath.Join(dir, ".kiln_state.json"))
		}
		assertDestroyed(t, kiln, dir, infraID, interrupt)
	})
	if err != nil {
		gather(t, kiln, dir)
		t.Fatalf("create cluster: %v\n%s", err, lastLines(out, 60))
	}
	t.Logf("create cluster: %s", time.Since(start).Round(time.Second))
	probe.finish(t)
	assertOutput(t, "create cluster", out, "Pod network works", "Install complete!", "export KUBECONFIG="+filepath.Join(dir, "auth", "kubeconfig"), "Time elapsed:")
	// No component would accept a kubeadmin password (there is no OAuth
	// server): kiln neither writes nor names one.
	if strings.Contains(out, "kubeadmin") {
		t.Errorf("create cluster output names a kubeadmin credential")
	}
	if _, err := os.Stat(filepath.Join(dir, "auth", "kubeadmin-password")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("auth/kubeadmin-password: %v, want it absent", err)
	}

	if masters == 3 {
		// First: the renewal is due a few minutes after create.
		var names []string
		for i := range masters {
			names = append(names, fmt.Sprintf("%s-master-%d", infraID, i))
		}
		assertAutoRenew(t, kiln, dir, localMasters(t, infraID, machineCIDR, masters), names)
	} else {
		assertManualRenewal(t, infraID+"-master-0")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client := adminClient(t, dir)
	if body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || string(body) != "ok" {
		t.Fatalf("/readyz = %q, %v", body, err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != masters+workers {
		t.Fatalf("%d nodes, want %d", len(nodes.Items), masters+workers)
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		if strings.Contains(n.Name, "bootstrap") {
			t.Errorf("the bootstrap machine registered as node %s", n.Name)
		}
		// The runtime built from source, not Debian's containerd 1.6.
		if got, want := n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://"+strings.TrimPrefix(release.ContainerdVersion, "v"); got != want {
			t.Errorf("node %s: container runtime %s, want %s", n.Name, got, want)
		}
	}
	assertEtcdMembers(t, infraID, masters)
	assertConfigServerLocked(t, dir)
	if _, err := os.Stat(filepath.Join(machine.DefaultStateRoot, infraID+"-bootstrap")); !os.IsNotExist(err) {
		t.Errorf("the bootstrap machine still exists after install-complete: %v", err)
	}
	if networkType == "KilnVXLAN" && workers > 0 {
		// Everything below runs with masters and workers on two L2
		// segments joined by a router.
		splitLocalSegments(ctx, t, client, infraID, machineCIDR, masters, workers)
	}
	assertPodNetwork(ctx, t, client, infraID+"-master-0", infraID+"-worker-0")
	if networkType == "KilnVXLAN" {
		assertOverlayRoutes(ctx, t, client, machine.NewManager(machine.Options{}).Exec)
	}
	if workers > 0 {
		assertNetworkPolicy(ctx, t, client, infraID)
	}
	assertHostNetworkReachesServices(t, infraID, masters, workers)
	if masters == 1 {
		// Sealed (networking.egress None): a pod's request out, its lookup of
		// an outside name and a pull of the world's image fail fast.
		assertSealedPod(t, kiln, dir)
	}
	assertUserManifest(ctx, t, client)
	if workers > 0 {
		assertServingCSRApproval(t, dir, infraID)
	}
	assertNodeClientCSRClaims(t, dir, infraID)
	if masters == 1 {
		// The add-ons, on the smaller cluster only: the checks need one.
		assertApps(t, dir, infraID)
		// The upstream NetworkPolicy specs run here while the HA cluster
		// runs the conformance subset: the two clusters are tested at once,
		// and the HA one takes longer.
		runNetpolSubset(t, kiln, dir)
		// Last: it waits for the certificates to expire.
		assertRenewExpired(t, kiln, dir, localMasters(t, infraID, machineCIDR, masters))
	}
	if masters == 3 {
		// Backed up with three etcd members, the user's manifest in it.
		assertBackup(t, kiln, dir, key)
		runConformanceSubset(t, kiln, dir)
		assertRestart(t, kiln, dir, infraID, client, masters)
		assertRenew(t, kiln, dir, localMasters(t, infraID, machineCIDR, masters))
		// It rolls the cluster back to its backup, which holds the CAs of
		// create: before the CA rotation.
		assertRestore(t, kiln, dir, infraID, client, masters+workers, key)
		ms := localMasters(t, infraID, machineCIDR, masters)
		assertRotateCA(t, kiln, dir, ms, append(ms, localMachines(t, infraID, machineCIDR, "worker", workers)...))
	}
}

// assertOverlayRoutes checks, on every node (a command run there by
// exec), that the route to each other node's pod CIDR goes through the
// kiln.vxlan tunnel and that the CNI bridge's MTU leaves room for the
// VXLAN headers: the pod traffic assertPodNetwork and assertNetworkPolicy
// saw crossed the overlay, not host-gw routes.
func assertOverlayRoutes(ctx context.Context, t *testing.T, client kubernetes.Interface, exec func(ctx context.Context, node string, argv ...string) ([]byte, error)) {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, peer := range nodes.Items {
			if peer.Name == n.Name || peer.Spec.PodCIDR == "" {
				continue
			}
			cidr, err := netip.ParsePrefix(peer.Spec.PodCIDR)
			if err != nil {
				t.Fatalf("node %s: podCIDR %q: %v", peer.Name, peer.Spec.PodCIDR, err)
			}
			podIP := cidr.Masked().Addr().Next().Next().String() // host-local's first pod address
			out, err := exec(ctx, n.Name, "ip", "-o", "route", "get", podIP)
			if err != nil || !strings.Contains(string(out), " dev kiln.vxlan ") {
				t.Errorf("%s: ip route get %s (a pod of %s) = %q, %v; want through kiln.vxlan", n.Name, podIP, peer.Name, out, err)
			}
		}
		out, err := exec(ctx, n.Name, "cat", "/sys/class/net/kiln.vxlan/mtu", "/etc/cni/net.d/10-kiln.conflist")
		if err != nil || !strings.HasPrefix(string(out), "1450\n") || !strings.Contains(string(out), `"mtu": 1450`) {
			t.Errorf("%s: kiln.vxlan MTU and CNI config = %q, %v; want 1450 on both", n.Name, out, err)
		}
	}
}

// assertHostNetworkReachesServices checks, in every node machine's own
// network namespace (where kube-apiserver calls webhooks and hostNetwork
// pods run), that the service network has a route through host0 and that a
// TCP connect to the kubernetes Service's ClusterIP succeeds through
// kube-proxy's DNAT. Without the route the connect fails with "Network is
// unreachable" (issue 8's AdmissionWebhook failure).
func assertHostNetworkReachesServices(t *testing.T, infraID string, masters, workers int) {
	t.Helper()
	const kubernetesServiceIP = "172.30.0.1" // the default serviceNetwork's first address
	mgr := machine.NewManager(machine.Options{})
	var names []string
	for i := range masters {
		names = append(names, fmt.Sprintf("%s-master-%d", infraID, i))
	}
	for i := range workers {
		names = append(names, fmt.Sprintf("%s-worker-%d", infraID, i))
	}
	for _, name := range names {
		out, err := mgr.Exec(context.Background(), name, "ip", "-o", "route", "get", kubernetesServiceIP)
		if err != nil || !strings.Contains(string(out), " dev host0 ") || strings.Contains(string(out), " via ") {
			t.Errorf("%s: ip route get %s = %q, %v; want on-link through host0", name, kubernetesServiceIP, out, err)
		}
		connect := fmt.Sprintf("exec 3<>/dev/tcp/%s/443", kubernetesServiceIP)
		if out, err := mgr.Exec(context.Background(), name, "timeout", "10", "bash", "-c", connect); err != nil {
			t.Errorf("%s: TCP connect to the kubernetes Service from the host network: %v\n%s", name, err, out)
		}
	}
}

// userManifest is a manifest the user adds to manifests/ between `kiln
// create manifests` and `kiln create cluster`; bootkube applies it with
// kiln's, in file-name order. The file holds its own Namespace first.
const userManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: e2e-user
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: e2e-user
  namespace: e2e-user
data:
  added-by: the e2e suite
`

// addUserManifest runs `kiln create manifests` and adds userManifest.
func addUserManifest(t *testing.T, kiln, dir string) {
	t.Helper()
	if out, err := runKiln(t, kiln, 5*time.Minute, "create", "manifests", "--dir", dir); err != nil {
		t.Fatalf("create manifests: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests", "50-e2e-user.yaml"), []byte(userManifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertUserManifest checks the objects of userManifest exist in the cluster.
func assertUserManifest(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("e2e-user").Get(ctx, "e2e-user", metav1.GetOptions{})
	if err != nil {
		t.Errorf("the ConfigMap of the manifest added to manifests/ is not in the cluster: %v", err)
		return
	}
	if cm.Data["added-by"] != "the e2e suite" {
		t.Errorf("ConfigMap e2e-user/e2e-user data = %v", cm.Data)
	}
}

// buildStaticKiln builds the kiln binary into a temporary directory, as
// make build does (static, -trimpath): it runs inside machines and pods
// too, and make e2e compiles the tests with the same settings, so the
// build finds every package compiled in the Go build cache.
func buildStaticKiln(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kiln")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/kiln")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kiln: %v\n%s", err, out)
	}
	return bin
}

func writeInstallConfig(t *testing.T, dir, name string, masters, workers int, machineCIDR, networkType string) {
	t.Helper()
	if networkType != "" {
		networkType = "\n  networkType: " + networkType
	}
	cfg := fmt.Sprintf(`apiVersion: kiln.dev/v1
baseDomain: e2e.example.com
metadata:
  name: %s
controlPlane:
  name: master
  replicas: %d
compute:
- name: worker
  replicas: %d
networking:%s
  egress: None
  machineNetwork:
  - cidr: %s
platform:
  local:
    defaultMachinePlatform:
      memoryMiB: 3072
`, name, masters, workers, networkType, machineCIDR)
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func runKiln(t *testing.T, kiln string, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	requireSealed(t, kiln, args)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, kiln, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Stdin = nil
	err := cmd.Run()
	return out.String(), err
}

// interruptCreate starts `kiln create cluster`, sends SIGINT once its output
// shows marker and checks it exits with the interrupted code, 130.
func interruptCreate(t *testing.T, kiln, dir, marker string) {
	t.Helper()
	// 5 s after the marker: well inside the wait.
	out, err := signalAt(t, kiln, marker, 5*time.Second, os.Interrupt, "create", "cluster", "--dir", dir)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("interrupted create cluster: %v, want exit code 130\n%s", err, lastLines(out, 20))
	}
	t.Logf("create cluster interrupted with SIGINT while waiting: exit 130")
}

// signalAt runs kiln with args, sends it sig after once its output shows
// marker, and returns all it printed and how it ended.
func signalAt(t *testing.T, kiln, marker string, after time.Duration, sig os.Signal, args ...string) (string, error) {
	t.Helper()
	requireSealed(t, kiln, args)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kiln, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(out.String(), marker) {
		n, err := pr.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			t.Fatalf("kiln %s ended before %q:\n%s", strings.Join(args[:2], " "), marker, lastLines(out.String(), 40))
		}
	}
	time.Sleep(after)
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	// The rest of the output, unless a process kiln left behind holds the
	// pipe open.
	rest := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(pr); rest <- b }()
	err = cmd.Wait()
	select {
	case b := <-rest:
		out.Write(b)
	case <-time.After(5 * time.Second):
	}
	return out.String(), err
}

func readInfraID(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, installdir.Metadata))
	if err != nil {
		t.Fatalf("metadata.json: %v", err)
	}
	m, err := metadata.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return m.InfraID
}

func adminClient(t *testing.T, dir string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "auth", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.Dial = clusterDial
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The files of a master's etcd client: the etcd CA and the API server's
// etcd client certificate and key.
const (
	etcdCAFile     = "/etc/kubernetes/pki/etcd/ca.crt"
	etcdClientCert = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
	etcdClientKey  = "/etc/kubernetes/pki/apiserver-etcd-client.key"
)

// etcdctl is the command line of etcdctl args on a master, against its own
// member with the API server's client certificate.
func etcdctl(args ...string) []string {
	return append([]string{"etcdctl", "--endpoints=https://127.0.0.1:2379", "--cacert=" + etcdCAFile,
		"--cert=" + etcdClientCert, "--key=" + etcdClientKey}, args...)
}

// assertEtcdMembers checks with etcdctl on master-0 that etcd has exactly the
// masters as voting members: the bootstrap member is gone.
func assertEtcdMembers(t *testing.T, infraID string, masters int) {
	t.Helper()
	var names []string
	for i := range masters {
		names = append(names, fmt.Sprintf("%s-master-%d", infraID, i))
	}
	assertEtcdVoters(context.Background(), t, machine.NewManager(machine.Options{}).Exec, names)
}

// assertEtcdVoters checks with etcdctl on the first of masters that etcd
// has exactly masters as members, all voting.
func assertEtcdVoters(ctx context.Context, t *testing.T, exec machineExec, masters []string) {
	t.Helper()
	out, err := exec(ctx, masters[0], etcdctl("member", "list", "-w", "json")...)
	if err != nil {
		t.Fatalf("etcdctl member list on %s: %v\n%s", masters[0], err, out)
	}
	var list struct {
		Members []struct {
			Name      string `json:"name"`
			IsLearner bool   `json:"isLearner"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("etcdctl output: %v\n%s", err, out)
	}
	var got []string
	for _, m := range list.Members {
		got = append(got, fmt.Sprintf("%s learner=%v", m.Name, m.IsLearner))
	}
	wantVoters(t, got, masters)
}

// wantVoters checks that got (etcd's members as "<name> learner=<bool>")
// are exactly masters, all voting.
func wantVoters(t *testing.T, got, masters []string) {
	t.Helper()
	var want []string
	for _, m := range masters {
		want = append(want, m+" learner=false")
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("etcd's members are %q, want %q", got, want)
	}
}

// assertPodNetwork runs an HTTP server pod on the node server behind a
// ClusterIP Service, and a client pod on the node client that resolves
// kubernetes.default through cluster DNS and fetches from the Service: pod network across
// nodes, kube-proxy and CoreDNS. Both run the kiln binary bound into every
// machine (no other image exists offline) in the pause image.
func assertPodNetwork(ctx context.Context, t *testing.T, client kubernetes.Interface, serverNode, clientNode string) {
	t.Helper()
	ns := "default"
	server := probePod("probe-server", serverNode, corev1.RestartPolicyAlways, "--serve=:8080", "--body=hello from "+serverNode)
	if _, err := client.CoreV1().Pods(ns).Create(ctx, server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "probe-server"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(ctx, t, client, ns, "probe-server", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.PodIP) > 0
	})
	assertProbeClient(ctx, t, client, "probe-client", clientNode, serverNode)
}

// assertProbeClient runs a client pod called name on clientNode that
// resolves cluster DNS and gets the answer of assertPodNetwork's Service,
// whose server runs on serverNode.
func assertProbeClient(ctx context.Context, t *testing.T, client kubernetes.Interface, name, clientNode, serverNode string) {
	t.Helper()
	ns := "default"
	// The client retries until the Service's endpoints are programmed.
	clientPod := probePod(name, clientNode, corev1.RestartPolicyOnFailure,
		"--resolve=kubernetes.default", "--get=http://probe.default.svc.cluster.local/")
	if _, err := client.CoreV1().Pods(ns).Create(ctx, clientPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(ctx, t, client, ns, name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs, err := client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubernetes.default has address 172.30.0.1", ": hello from " + serverNode} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("client pod log lacks %q:\n%s", want, logs)
		}
	}
}

// probePod is a pod in default on node running kiln's node probe (the
// node's kiln binary in the pause image) with args.
func probePod(name, node string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	kilnVol := corev1.Volume{Name: "kiln", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/usr/local/bin/kiln"}}}
	mount := corev1.VolumeMount{Name: "kiln", MountPath: "/kiln", ReadOnly: true}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			RestartPolicy: restart,
			Volumes:       []corev1.Volume{kilnVol},
			Containers: []corev1.Container{{
				Name: name, Image: release.Default().Image(release.Pause), ImagePullPolicy: corev1.PullNever,
				Command: append([]string{"/kiln", "node", "probe"}, args...), VolumeMounts: []corev1.VolumeMount{mount},
			}},
		},
	}
}

func waitPod(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, done func(*corev1.Pod) bool) {
	t.Helper()
	var (
		last    *corev1.Pod
		lastErr error
	)
	for ctx.Err() == nil {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		lastErr = err
		if err == nil {
			last = p
			if done(p) {
				return
			}
		}
		time.Sleep(2 * time.Second)
	}
	// The pod may never have been read: report the last error instead of
	// dereferencing a nil pod.
	if last == nil {
		t.Fatalf("pod %s was never read: %v", name, lastErr)
	}
	t.Fatalf("pod %s did not get there (last error: %v): %+v", name, lastErr, last.Status)
}

// assertDestroyed runs destroy cluster and checks nothing of the cluster is
// left on the host and only the debug log (and consumed inputs) in --dir.
func assertDestroyed(t *testing.T, kiln, dir, infraID string, byInfraID bool) {
	assertDeclared(t, dir)
	start := time.Now()
	args := []string{"destroy", "cluster", "--dir", dir}
	if byInfraID {
		args = append(args, "--infra-id", infraID)
	}
	out, err := runKiln(t, kiln, 10*time.Minute, args...)
	if err != nil {
		t.Fatalf("destroy cluster: %v\n%s", err, lastLines(out, 40))
	}
	t.Logf("destroy cluster: %s", time.Since(start).Round(100*time.Millisecond))
	if ps, _ := exec.Command("pgrep", "-f", "systemd-nspawn.*"+infraID).Output(); len(ps) > 0 {
		t.Errorf("nspawn processes left: %s", ps)
	}
	if links, _ := exec.Command("ip", "-br", "link").Output(); strings.Contains(string(links), "kiln-"+infraID[strings.LastIndex(infraID, "-")+1:]) {
		t.Errorf("bridge left:\n%s", links)
	}
	if mounts, _ := os.ReadFile("/proc/mounts"); strings.Contains(string(mounts), infraID) {
		t.Errorf("mounts left of %s", infraID)
	}
	if entries, _ := filepath.Glob(filepath.Join(machine.DefaultStateRoot, infraID+"-*")); len(entries) > 0 {
		t.Errorf("machine state left: %v", entries)
	}
	// The load balancers' and the registry's files, the registry's storage among them.
	if _, err := os.Stat(filepath.Join(provider.DefaultLBDir, infraID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left (%v)", filepath.Join(provider.DefaultLBDir, infraID), err)
	}
	if ps, _ := exec.Command("pgrep", "-f", "serve --config "+filepath.Join(provider.DefaultLBDir, infraID)).Output(); len(ps) > 0 {
		t.Errorf("registry process left: %s", ps)
	}
	// Only what graph/installdir says destroy keeps (the debug log, the
	// consumed inputs under .kiln, install-config.yaml put back, the log
	// bundles, the backups) may be left.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !keptByDestroy(e.Name()) {
			t.Errorf("%s left in --dir after destroy", e.Name())
		}
	}
	if sub, _ := os.ReadDir(filepath.Join(dir, ".kiln")); len(sub) > 1 || (len(sub) == 1 && sub[0].Name() != "consumed") {
		t.Errorf(".kiln holds more than consumed inputs: %v", sub)
	}
}

// keptByDestroy reports whether name, an entry of --dir's top folder, is
// one that installdir.Layout has destroy keep or restore, or a folder on
// the way to one (.kiln). The lock and the journal are not: a finished
// destroy leaves neither.
func keptByDestroy(name string) bool {
	if name == installdir.Lock || name == installdir.Journal {
		return false
	}
	for _, e := range installdir.Layout() {
		if e.Destroy == installdir.Removed {
			continue
		}
		if ok, _ := path.Match(e.Path, name); ok || strings.HasPrefix(e.Path, name+"/") {
			return true
		}
	}
	return false
}

// assertDeclared checks that every path a cluster's life left in dir is one
// that graph/installdir declares, so that destroy knows what to do with it.
func assertDeclared(t *testing.T, dir string) {
	t.Helper()
	stray, err := installdir.Undeclared(dir)
	if err != nil {
		t.Errorf("walking %s: %v", dir, err)
	}
	for _, rel := range stray {
		t.Errorf("%s in --dir is not declared by graph/installdir's Layout", rel)
	}
}

func gather(t *testing.T, kiln, dir string) {
	out, err := runKiln(t, kiln, 5*time.Minute, "gather", "bootstrap", "--dir", dir)
	t.Logf("gather bootstrap: %v\n%s", err, lastLines(out, 5))
	if a := os.Getenv("KILN_E2E_ARTIFACTS"); a != "" {
		bundles, _ := filepath.Glob(filepath.Join(dir, "log-bundle-*.tar.gz"))
		for _, b := range bundles {
			data, _ := os.ReadFile(b)
			_ = os.WriteFile(filepath.Join(a, filepath.Base(b)), data, 0o600)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
