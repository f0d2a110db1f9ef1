package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
)

// TestApps runs the add-on checks of assertApps against a cluster that
// already exists: KILN_E2E_APPS_DIR names its --dir (the cluster tests call
// assertApps on the clusters they create).
func TestApps(t *testing.T) {
	requireMachineHost(t)
	dir := os.Getenv("KILN_E2E_APPS_DIR")
	if dir == "" {
		t.Skip("set KILN_E2E_APPS_DIR to the --dir of a running local cluster")
	}
	assertApps(t, dir, readInfraID(t, dir))
}

// assertApps checks what a chart expects of a local cluster, as on kind and
// minikube: a PVC of the default StorageClass keeps a file across pods,
// `kubectl top` shows every node, a LoadBalancer Service answers the
// host at its external address until it is deleted, and an image pushed
// to the cluster's registry from the host runs with imagePullPolicy Always,
// and a NodePort Service answers on every node after every kube-proxy
// restarted. The pods run the kiln
// binary bound into every machine, in the pause image.
func assertApps(t *testing.T, dir, infraID string) {
	client := adminClient(t, dir)
	t.Run("storage", func(t *testing.T) { assertStorage(t, client, machine.NewManager(machine.Options{}).Exec) })
	t.Run("metrics", func(t *testing.T) { assertMetrics(t, client, localKubectl(dir, infraID)) })
	t.Run("loadbalancer", func(t *testing.T) { assertLoadBalancer(t, client, infraID) })
	t.Run("registry", func(t *testing.T) { assertRegistry(t, client, infraID) })
	t.Run("kube-proxy restart", func(t *testing.T) { assertKubeProxyRestart(t, client) })
}

// probeSpec is a pod running `kiln node probe args...`.
func probeSpec(labels map[string]string, args ...string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{{Name: "kiln", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/usr/local/bin/kiln"}}}},
			Containers: []corev1.Container{{
				Name: "probe", Image: release.Default().Image(release.Pause), ImagePullPolicy: corev1.PullNever,
				Command:      append([]string{"/kiln", "node", "probe"}, args...),
				VolumeMounts: []corev1.VolumeMount{{Name: "kiln", MountPath: "/kiln", ReadOnly: true}},
			}},
		},
	}
}

// nodeHas reports whether path is on node (through exec, as root there).
func nodeHas(ctx context.Context, exec machineExec, node, path string) (bool, error) {
	out, err := exec(ctx, node, "sh", "-c", `if [ -e "$1" ]; then echo yes; else echo no; fi`, "sh", path)
	if err != nil {
		return false, fmt.Errorf("%w: %s", err, out)
	}
	return strings.TrimSpace(string(out)) == "yes", nil
}

// kubectlRunner runs the cluster release's kubectl as the cluster's admin
// with args and returns what it printed.
type kubectlRunner func(ctx context.Context, args ...string) ([]byte, error)

// localKubectl runs the kubectl of a local cluster's first master, from
// its root on the host, with --dir's admin kubeconfig.
func localKubectl(dir, infraID string) kubectlRunner {
	return func(ctx context.Context, args ...string) ([]byte, error) {
		kubectl := filepath.Join(machine.DefaultStateRoot, infraID+"-master-0", "root", release.BinDir, "kubectl")
		kc := filepath.Join(dir, "auth", "kubeconfig")
		return exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
	}
}

// kilnKubectl runs `kiln kubectl --dir dir -- args`: the release's
// kubectl from kiln's cache, with --dir's admin kubeconfig.
func kilnKubectl(kiln, dir string) kubectlRunner {
	return func(ctx context.Context, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, kiln, append([]string{"kubectl", "--dir", dir, "--"}, args...)...).CombinedOutput()
	}
}

// storageProbe is a StatefulSet's pod that wrote a token on its claim of
// the default class (startStorageProbe).
type storageProbe struct {
	ns, name, token string
	// pod is the pod that wrote it.
	pod *corev1.Pod
	pvc *corev1.PersistentVolumeClaim
	pv  *corev1.PersistentVolume
}

// file is where the probe's file is on its node.
func (p storageProbe) file() string { return path.Join(p.pv.Spec.HostPath.Path, "probe.txt") }

// startStorageProbe creates a StatefulSet name in default whose pod writes
// a token on a claim without a storage class, and returns it once it wrote
// it; the claim must be Bound by the default class, standard, to a
// hostPath volume under /var/lib/kiln/local-path that is deleted with it.
func startStorageProbe(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) storageProbe {
	t.Helper()
	p := storageProbe{ns: "default", name: name, token: fmt.Sprintf("kept-%d", time.Now().UnixNano())}
	labels := map[string]string{"app": name}
	tmpl := probeSpec(labels, "--file=/data/probe.txt", "--body="+p.token, "--serve=:8080")
	tmpl.Spec.Containers[0].VolumeMounts = append(tmpl.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	one := int32(1)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tmpl,
			// No storageClassName: the default class must serve it.
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}},
		},
	}
	if _, err := client.AppsV1().StatefulSets(p.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.pod = waitPodLog(ctx, t, client, p.ns, name+"-0", "", "wrote /data/probe.txt: "+p.token)
	var err error
	if p.pvc, err = client.CoreV1().PersistentVolumeClaims(p.ns).Get(ctx, "data-"+p.pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.pvc.Status.Phase != corev1.ClaimBound || p.pvc.Spec.StorageClassName == nil || *p.pvc.Spec.StorageClassName != "standard" {
		t.Fatalf("claim %s: phase %s, class %v; want Bound of class standard", p.pvc.Name, p.pvc.Status.Phase, p.pvc.Spec.StorageClassName)
	}
	if p.pv, err = client.CoreV1().PersistentVolumes().Get(ctx, p.pvc.Spec.VolumeName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || p.pv.Spec.HostPath == nil ||
		!strings.HasPrefix(p.pv.Spec.HostPath.Path, "/var/lib/kiln/local-path/") {
		t.Fatalf("volume %s: reclaim %s, source %+v; want Delete, a hostPath under /var/lib/kiln/local-path", p.pv.Name, p.pv.Spec.PersistentVolumeReclaimPolicy, p.pv.Spec.PersistentVolumeSource)
	}
	return p
}

// assertOnNode checks that the probe's file is on its node's own disk,
// with its token (read through exec, on the node).
func (p storageProbe) assertOnNode(ctx context.Context, t *testing.T, exec machineExec) {
	t.Helper()
	if data, err := exec(ctx, p.pod.Spec.NodeName, "cat", "--", p.file()); err != nil || string(data) != p.token {
		t.Errorf("%s on node %s: %q, %v; want %q", p.file(), p.pod.Spec.NodeName, data, err, p.token)
	}
}

// assertStorage: a StatefulSet's pod writes a file on its claim; after the
// pod is deleted its successor reads the same file; deleting the claim
// removes the volume and its directory on the node.
func assertStorage(t *testing.T, client kubernetes.Interface, exec machineExec) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	p := startStorageProbe(ctx, t, client, "probe-store")
	p.assertOnNode(ctx, t, exec)
	if err := client.CoreV1().Pods(p.ns).Delete(ctx, p.pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodLog(ctx, t, client, p.ns, p.pod.Name, p.pod.UID, "read /data/probe.txt: "+p.token)

	if err := client.AppsV1().StatefulSets(p.ns).Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, "pod "+p.pod.Name, func() error {
		_, err := client.CoreV1().Pods(p.ns).Get(ctx, p.pod.Name, metav1.GetOptions{})
		return err
	})
	if err := client.CoreV1().PersistentVolumeClaims(p.ns).Delete(ctx, p.pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, "volume "+p.pv.Name, func() error {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, p.pv.Name, metav1.GetOptions{})
		return err
	})
	if there, err := nodeHas(ctx, exec, p.pod.Spec.NodeName, p.pv.Spec.HostPath.Path); there || err != nil {
		t.Errorf("the volume's directory %s is still on node %s (%v)", p.pv.Spec.HostPath.Path, p.pod.Spec.NodeName, err)
	}
}

// waitPodLog waits until pod (a new one when old is set: another UID) runs
// and its log holds want, and returns it.
func waitPodLog(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, old types.UID, want string) *corev1.Pod {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.UID != old && p.Status.Phase == corev1.PodRunning {
			logs, err := client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err == nil && strings.Contains(string(logs), want) {
				return p
			}
			last = string(logs)
		} else if err == nil {
			last = fmt.Sprintf("phase %s, uid %s: %+v", p.Status.Phase, p.UID, p.Status.Conditions)
		} else {
			last = err.Error()
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("pod %s/%s never logged %q; last seen: %s", ns, name, want, last)
	return nil
}

// waitGone waits until get returns NotFound.
func waitGone(ctx context.Context, t *testing.T, what string, get func() error) {
	t.Helper()
	for ctx.Err() == nil {
		if err := get(); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("%s was not deleted", what)
}

// assertMetrics: the metrics API has usage for every node, and the
// release's kubectl prints `kubectl top nodes` and `kubectl top pods -A`
// with numbers.
func assertMetrics(t *testing.T, client kubernetes.Interface, kubectl kubectlRunner) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for {
		raw, err := client.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").DoRaw(ctx)
		var list struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
				Usage    map[string]string     `json:"usage"`
			} `json:"items"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &list)
		}
		usage := map[string]bool{}
		for _, it := range list.Items {
			usage[it.Metadata.Name] = it.Usage["cpu"] != "" && it.Usage["memory"] != ""
		}
		missing := []string{}
		for _, n := range nodes.Items {
			if !usage[n.Name] {
				missing = append(missing, n.Name)
			}
		}
		if err == nil && len(missing) == 0 {
			break
		}
		last = fmt.Sprintf("err %v, no usage for %v", err, missing)
		if ctx.Err() != nil {
			t.Fatalf("metrics API: %s", last)
		}
		time.Sleep(5 * time.Second)
	}
	// kubectl reads what metrics-server scraped last: a pod that started
	// after its last scrape (CoreDNS moved off a reset host) is missing
	// until the next one, so both views are polled, not read once.
	var top []byte
	waitFor(t, ctx, 3*time.Minute, "kubectl top nodes and pods", func() (bool, string) {
		out, err := kubectl(ctx, "top", "nodes", "--no-headers")
		if err != nil {
			return false, fmt.Sprintf("kubectl top nodes: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(nodes.Items) {
			return false, fmt.Sprintf("kubectl top nodes printed %d lines for %d nodes:\n%s", len(lines), len(nodes.Items), out)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) < 5 || !strings.HasSuffix(f[1], "m") || !strings.HasSuffix(f[3], "Mi") {
				return false, fmt.Sprintf("kubectl top nodes line without numbers: %q", l)
			}
		}
		top = out
		out, err = kubectl(ctx, "top", "pods", "-A", "--no-headers")
		if err != nil || !strings.Contains(string(out), "coredns") {
			return false, fmt.Sprintf("kubectl top pods -A without CoreDNS: %v\n%s", err, out)
		}
		return true, ""
	})
	t.Logf("kubectl top nodes:\n%s", top)
}

// assertLoadBalancer: a Deployment behind a LoadBalancer Service gets an
// external address from the machine network's pool, an HTTP request from
// the host reaches the pod there, and once the Service is deleted the
// address no longer answers and is off the bridge.
func assertLoadBalancer(t *testing.T, client kubernetes.Interface, infraID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns, name := "default", "probe-lb"
	body := "hello from behind a LoadBalancer"
	createProbeService(ctx, t, client, name, body, corev1.ServiceTypeLoadBalancer, "")
	ip := waitLoadBalancerIP(ctx, t, client, ns, name, 5*time.Minute)
	cfg := serviceLBConfig(t, infraID)
	if a, err := netip.ParseAddr(ip); err != nil || !cfg.Pool.Contains(a) {
		t.Fatalf("external address %s is not in the pool %s", ip, cfg.Pool)
	}
	// service-lb proxies to the addresses kiln assigned the machines, by
	// machine name: each Node must be one of them, at the address it reports.
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		a, ok := cfg.Machines.Addresses[n.Name]
		if !ok {
			t.Errorf("Node %s is not among service-lb's machines (%s)", n.Name, cfg.Machines)
			continue
		}
		for _, na := range n.Status.Addresses {
			if na.Type == corev1.NodeInternalIP && na.Address != a.String() {
				t.Errorf("Node %s reports %s, service-lb proxies to %s", n.Name, na.Address, a)
			}
		}
	}
	url := "http://" + ip + "/"
	var got string
	for got != body {
		// Only once service-lb put the address on the host: before, a
		// request to it would leave the machine by its default route.
		if hostHolds(ip) {
			got, err = httpGet(url)
		}
		if ctx.Err() != nil {
			t.Fatalf("GET %s from the host: %q, %v", url, got, err)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("GET %s from the host: %q", url, got)
	if err := client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		// Once the address has left the host, a request to it would leave
		// the machine by its default route: check that first.
		if !hostHolds(ip) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s still answers or is still on the host after the Service was deleted", url)
		}
		time.Sleep(2 * time.Second)
	}
}

// createProbeService runs a pod answering body on :8080 (a Deployment of
// one, on node unless that is "") behind a Service name of type typ in
// default, both deleted when t ends, and returns the Service as created.
func createProbeService(ctx context.Context, t *testing.T, client kubernetes.Interface, name, body string, typ corev1.ServiceType, node string) *corev1.Service {
	t.Helper()
	ns := "default"
	labels := map[string]string{"app": name}
	one := int32(1)
	spec := probeSpec(labels, "--serve=:8080", "--body="+body)
	if node != "" {
		spec.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: spec},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Type: typ, Selector: labels,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return svc
}

// waitLoadBalancerIP waits up to d for the LoadBalancer Service ns/name
// to get an address, and returns it.
func waitLoadBalancerIP(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, d time.Duration) string {
	t.Helper()
	var ip string
	waitFor(t, ctx, d, "an address for LoadBalancer Service "+name, func() (bool, string) {
		s, err := client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, fmt.Sprintf("%v %+v", err, s.Status)
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return true, ""
	})
	return ip
}

func httpGet(url string) (string, error) { return httpGetWithin(url, 3*time.Second) }

// httpGetWithin GETs url, giving up after d, and returns the body.
func httpGetWithin(url string, d time.Duration) (string, error) {
	c := http.Client{Timeout: d, Transport: clusterTransport()}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serviceLBConfig reads the cluster's `kiln service-lb` configuration.
func serviceLBConfig(t *testing.T, infraID string) servicelb.Config {
	t.Helper()
	cfg, err := servicelb.LoadConfig(filepath.Join(provider.DefaultLBDir, infraID, servicelb.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
