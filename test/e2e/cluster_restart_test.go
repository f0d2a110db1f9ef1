package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/local/registry"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// assertRestart is issue 10's scenario on the HA cluster: a master's
// machine is SIGKILLed, the API keeps serving writes, wait-for
// install-complete names the dead master, and `kiln start cluster` brings
// it back (3 etcd voters, its Node Ready). Then `kiln stop cluster` (every
// machine and daemon stopped, and the Terraform state saying so) and `kiln
// start cluster` (every node Ready, the ConfigMap's last value). Then a
// simulated host reboot
// (every machine process, the load balancer and the image registry
// killed, the bridge deleted, their files left): `kiln start cluster`
// brings the whole cluster back, with the ConfigMap's last value, a
// Deployment answering through its Service, and the registry with what
// create pushed into it (as after the stop and start).
func assertRestart(t *testing.T, kiln, dir, infraID string, client kubernetes.Interface, masters int) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	mgr := machine.NewManager(machine.Options{})
	cms := client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "restart"},
		Data: map[string]string{"value": "before the crash"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createEchoDeployment(ctx, t, client)

	// A master's machine crashes.
	victim := infraID + "-master-1"
	killMachine(ctx, t, mgr, victim)
	if st, err := mgr.State(ctx, victim); err != nil || st != machine.StateStopped {
		t.Fatalf("%s after SIGKILL: %s, %v", victim, st, err)
	}
	// The API keeps serving writes: etcd has quorum, the balancer drops
	// the dead backend.
	writeUntil(ctx, t, client, "after the crash", 2*time.Minute)

	// wait-for install-complete does not trust the dead master's Ready.
	start := time.Now()
	out, err := runKiln(t, kiln, 3*time.Minute, "wait-for", "install-complete", "--dir", dir, "--install-timeout", "2m")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Fatalf("wait-for install-complete with %s dead: %v, want exit code 5\n%s", victim, err, lastLines(out, 20))
	}
	if !strings.Contains(out, "machine "+victim+" is stopped") {
		t.Errorf("wait-for install-complete does not name the dead master:\n%s", lastLines(out, 20))
	}
	t.Logf("wait-for install-complete with %s dead: exit 5 in %s", victim, time.Since(start).Round(100*time.Millisecond))

	// start cluster brings it back from its disk.
	runMeasured(t, kiln, 15*time.Minute, "start cluster after "+victim+" crashed", "start", "cluster", "--dir", dir)
	assertEtcdMembers(t, infraID, masters)
	assertNodesReady(ctx, t, client, masters+1)

	// kiln stop cluster, then kiln start cluster: both apply the Terraform
	// stages, so after the stop every machine and daemon is stopped and the
	// Terraform state says so; the start brings the cluster back.
	writeUntil(ctx, t, client, "before the stop", time.Minute)
	runMeasured(t, kiln, 10*time.Minute, "stop cluster", "stop", "cluster", "--dir", dir)
	assertStopped(ctx, t, mgr, kiln, dir, infraID)
	runMeasured(t, kiln, 15*time.Minute, "start cluster after stop cluster", "start", "cluster", "--dir", dir)
	assertNodesReady(ctx, t, client, masters+1)
	assertEtcdMembers(t, infraID, masters)
	if cm, err := cms.Get(ctx, "restart", metav1.GetOptions{}); err != nil || cm.Data["value"] != "before the stop" {
		t.Errorf("ConfigMap after stop and start: %v, %v; want its last value", cm.Data, err)
	}
	assertRegistryKeeps(t, infraID)

	// A host reboot: every machine, the balancer and the registry die, the
	// bridge goes; their files stay.
	writeUntil(ctx, t, client, "before the reboot", time.Minute)
	names, err := mgr.List(ctx, infraID+"-")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		killMachine(ctx, t, mgr, n)
	}
	lbPID, err := os.ReadFile(filepath.Join(provider.DefaultLBDir, infraID, "lb.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(lbPID))); err != nil || syscall.Kill(pid, syscall.SIGKILL) != nil {
		t.Fatalf("killing the load balancer %q: %v", lbPID, err)
	}
	if pid, err := registry.Process("", filepath.Join(provider.DefaultLBDir, infraID)).PID(); err != nil || syscall.Kill(pid, syscall.SIGKILL) != nil {
		t.Fatalf("killing the image registry (pid %d): %v", pid, err)
	}
	bridge := "kiln-" + infraID[strings.LastIndex(infraID, "-")+1:]
	if out, err := exec.Command("ip", "link", "delete", "dev", bridge).CombinedOutput(); err != nil {
		t.Fatalf("deleting bridge %s: %v: %s", bridge, err, out)
	}

	assertNothingSentWithoutBridge(t, kiln, dir)

	runMeasured(t, kiln, 20*time.Minute, "start cluster after a host reboot, to every node Ready", "start", "cluster", "--dir", dir)
	assertNodesReady(ctx, t, client, masters+1)
	assertEtcdMembers(t, infraID, masters)
	cm, err := cms.Get(ctx, "restart", metav1.GetOptions{})
	if err != nil || cm.Data["value"] != "before the reboot" {
		t.Errorf("ConfigMap after the reboot: %v, %v; want its last value", cm.Data, err)
	}
	assertEchoAnswers(ctx, t, client, infraID)
	assertRegistryKeeps(t, infraID)
}

// runMeasured runs kiln with args, fails the test if it fails, and logs
// how long it took as "MEASURE <what>", with the stages kiln reported.
func runMeasured(t *testing.T, kiln string, timeout time.Duration, what string, args ...string) {
	t.Helper()
	start := time.Now()
	out, err := runKiln(t, kiln, timeout, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, lastLines(out, 40))
	}
	t.Logf("MEASURE %s: %s; its stages:\n%s", what, time.Since(start).Round(100*time.Millisecond), stageLines(out))
}

// assertStopped checks a cluster after kiln stop cluster: every machine
// of infraID is stopped, neither load balancer nor the image registry
// runs, and the Terraform
// state of every stage records each machine and daemon as stopped, so it
// matches the host.
func assertStopped(ctx context.Context, t *testing.T, mgr *machine.Manager, kiln, dir, infraID string) {
	t.Helper()
	names, err := mgr.List(ctx, infraID+"-")
	if err != nil || len(names) == 0 {
		t.Fatalf("machines of %s: %q, %v", infraID, names, err)
	}
	for _, n := range names {
		if st, err := mgr.State(ctx, n); err != nil || st != machine.StateStopped {
			t.Errorf("machine %s after stop cluster: %s, %v", n, st, err)
		}
	}
	lbDir := filepath.Join(provider.DefaultLBDir, infraID)
	for _, p := range []lb.Process{lb.ProcessIn(kiln, lbDir), servicelb.Process(kiln, lbDir), registry.Process("", lbDir)} {
		if pid, err := p.PID(); err == nil {
			t.Errorf("%s still runs (pid %d) after stop cluster", p.ConfigPath, pid)
		}
	}
	recorded := 0
	drv := tf.NewDriver(tf.DriverOptions{Dir: dir})
	for _, stage := range []string{tf.StageNetwork, tf.StageBootstrap, tf.StageCluster} {
		in, err := drv.Instances(stage)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range in {
			if st, ok := i.Attributes["state"]; ok {
				recorded++
				if st != "stopped" {
					t.Errorf("Terraform state of stage %s: %s is %v after stop cluster", stage, i.Address(), st)
				}
			}
		}
	}
	if recorded < len(names)+1 {
		t.Errorf("the Terraform state records %d machines and daemons; want every machine (%d) and the API load balancer", recorded, len(names))
	}
}

// killMachine SIGKILLs a machine's init and its nspawn process, as a crash
// would, and waits until the machine is stopped.
func killMachine(ctx context.Context, t *testing.T, mgr *machine.Manager, name string) {
	t.Helper()
	info, err := mgr.Inspect(ctx, name)
	if err != nil || info.State != machine.StateRunning {
		t.Fatalf("machine %s: %+v, %v", name, info, err)
	}
	for _, pid := range []int{info.Leader, info.PID} {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for st := machine.StateRunning; st == machine.StateRunning; {
		if ctx.Err() != nil {
			t.Fatalf("machine %s still runs after SIGKILL", name)
		}
		time.Sleep(100 * time.Millisecond)
		st, _ = mgr.State(ctx, name)
	}
}

// writeUntil writes value into the restart ConfigMap, retrying for up to
// d while the API fails over.
func writeUntil(ctx context.Context, t *testing.T, client kubernetes.Interface, value string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	var lastErr error
	for time.Now().Before(deadline) {
		cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, "restart", metav1.GetOptions{})
		if err == nil {
			cm.Data["value"] = value
			_, err = client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			return
		}
		lastErr = err
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("writing %q: the API did not take a write within %s: %v", value, d, lastErr)
}

func assertNodesReady(ctx context.Context, t *testing.T, client kubernetes.Interface, want int) {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			ready++
		} else {
			t.Errorf("node %s is not Ready", n.Name)
		}
	}
	if ready != want {
		t.Errorf("%d nodes Ready, want %d", ready, want)
	}
}

// echoPodSpec runs kiln's probe from the node's kiln binary in the pause
// image: the only images a node has offline.
func echoPodSpec(args ...string) corev1.PodSpec {
	return corev1.PodSpec{
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Volumes: []corev1.Volume{{Name: "kiln", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/usr/local/bin/kiln"}}}},
		Containers: []corev1.Container{{
			Name: "probe", Image: release.Default().Image(release.Pause), ImagePullPolicy: corev1.PullNever,
			Command:      append([]string{"/kiln", "node", "probe"}, args...),
			VolumeMounts: []corev1.VolumeMount{{Name: "kiln", MountPath: "/kiln", ReadOnly: true}},
		}},
	}
}

// createEchoDeployment runs two HTTP servers behind the Service echo.
func createEchoDeployment(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	createEcho(ctx, t, client, func(*corev1.PodSpec, *corev1.ServiceSpec) {})
}

// createEcho is createEchoDeployment with the pod and Service specs
// changed by edit before they are created.
func createEcho(ctx context.Context, t *testing.T, client kubernetes.Interface, edit func(*corev1.PodSpec, *corev1.ServiceSpec)) {
	t.Helper()
	two := int32(2)
	labels := map[string]string{"app": "echo"}
	spec := echoPodSpec("--serve=:8080", "--body=echo")
	// A CPU request, as a Service that must answer through maintenance has:
	// a pod without one is BestEffort, its CPU weight (cpu.shares) 2 where
	// the node's other pods and daemons weigh hundreds or more, and on a
	// node being drained, busy stopping its other pods, it did not answer a
	// probe within 2 s (an e2e run of TestClusterScale; the host's 2 cores
	// were saturated).
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	edit(&spec, &svc.Spec)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeployment(ctx, t, client)
}

// waitDeployment waits until both echo pods are available.
func waitDeployment(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	var last appsv1.DeploymentStatus
	for ctx.Err() == nil {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "echo", metav1.GetOptions{})
		if err == nil {
			last = d.Status
			if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2 {
				return
			}
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("deployment echo not available: %+v", last)
}

// assertEchoAnswers waits for the echo pods and fetches through the
// Service from a client pod on the worker.
func assertEchoAnswers(ctx context.Context, t *testing.T, client kubernetes.Interface, infraID string) {
	t.Helper()
	waitDeployment(ctx, t, client)
	spec := echoPodSpec("--get=http://echo.default.svc.cluster.local/")
	spec.RestartPolicy = corev1.RestartPolicyOnFailure
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": infraID + "-worker-0"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo-client", Namespace: "default"}, Spec: spec}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(ctx, t, client, "default", "echo-client", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs, err := client.CoreV1().Pods("default").GetLogs("echo-client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), ": echo") {
		t.Errorf("echo-client log after the reboot: %s", logs)
	}
}

// stageLines returns the lines of kiln's output that end a stage (" ✓ ...
// (elapsed)"), so a MEASURE line shows where the time went.
func stageLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, " ✓ ") {
			keep = append(keep, "\t"+l)
		}
	}
	return strings.Join(keep, "\n")
}

// assertNothingSentWithoutBridge runs what a user runs after a host reboot,
// before `kiln start cluster`, while the cluster's bridge is gone: the API
// VIP's route then leads through the host's default route, so kiln must
// refuse to dial it (docs/security.md, "Addresses kiln dials"; the suite's
// packet guard counts any packet that leaves). kiln kubectl exits 3 naming
// the refusal; wait-for gives up as any failed wait does (exit 5).
func assertNothingSentWithoutBridge(t *testing.T, kiln, dir string) {
	t.Helper()
	out, err := runKiln(t, kiln, time.Minute, "kubectl", "--dir", dir, "--", "get", "nodes")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(out, "is not reachable yet") {
		t.Errorf("kiln kubectl with the bridge gone: %v, want exit 3 saying the API is not reachable yet\n%s", err, lastLines(out, 10))
	}
	out, err = runKiln(t, kiln, time.Minute, "wait-for", "install-complete", "--dir", dir, "--install-timeout", "10s")
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Errorf("wait-for install-complete with the bridge gone: %v, want exit 5\n%s", err, lastLines(out, 10))
	}
	t.Logf("with the bridge gone, wait-for said:\n%s", lastLines(out, 3))
}
