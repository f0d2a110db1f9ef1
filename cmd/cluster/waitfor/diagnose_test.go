package waitfor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/platforms"
)

// recordProgress keeps every state line a wait shows.
type recordProgress struct {
	mu      sync.Mutex
	updates []string
}

func (p *recordProgress) Start(string) func(error) { return func(error) {} }

func (p *recordProgress) Update(detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updates = append(p.updates, detail)
}

func (p *recordProgress) all() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.updates, "\n")
}

func diagWaiter() (*Waiter, *fake.Clientset, *recordProgress) {
	w, client, _ := waiter()
	p := &recordProgress{}
	w.Progress = p
	return w, client, p
}

// pod makes a pod in ns with one container in status cs.
func pod(ns, name string, cs corev1.ContainerStatus) *corev1.Pod {
	cs.Name = "main"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{cs}},
	}
}

func crashLoop(restarts int32, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		RestartCount: restarts,
		State:        corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 1, Message: message,
		}},
	}
}

func healthy(restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		RestartCount: restarts, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 2,
		}},
	}
}

func createPods(t *testing.T, client *fake.Clientset, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBootstrapNamesCrashLoopingPod(t *testing.T) {
	w, client, progress := diagWaiter()
	createPods(t, client,
		pod("kube-system", "coredns-1", healthy(0)),
		pod("kube-system", "kube-apiserver-m-0", crashLoop(2, "later in the order")),
		pod("kiln-system", "etcd-installer-master-0", crashLoop(5, "starting\nexec /usr/local/bin/kiln: no such file or directory\n")),
		pod("default", "user-app", crashLoop(9, "not kiln's")),
	)
	err := w.BootstrapComplete(context.Background(), timesOut)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	const want = "pod kiln-system/etcd-installer-master-0 crash-looping (5 restarts): exec /usr/local/bin/kiln: no such file or directory"
	if !strings.Contains(progress.all(), want) {
		t.Errorf("state lines lack %q:\n%s", want, progress.all())
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("timeout error lacks %q: %v", want, err)
	}
	if strings.Contains(err.Error(), "user-app") || strings.Contains(err.Error(), "kube-apiserver") {
		t.Errorf("timeout error names another pod than the first of kiln's: %v", err)
	}
}

func TestInstallNamesCrashLoopingPodFromItsLogs(t *testing.T) {
	w, client, progress := diagWaiter()
	// Restarted three times and not ready, no termination message: the
	// last line comes from its previous logs (the fake answers "fake logs").
	cs := corev1.ContainerStatus{
		RestartCount: 3,
		State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Error", ExitCode: 1,
		}},
	}
	createPods(t, client, pod("local-path-storage", "local-path-provisioner-abc", cs))
	err := w.InstallComplete(context.Background(), 1, timesOut)
	const want = "pod local-path-storage/local-path-provisioner-abc crash-looping (3 restarts): fake logs"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to name %q", err, want)
	}
	if !strings.Contains(progress.all(), want+"; 0 of 1 nodes Ready") {
		t.Errorf("state lines lack %q before the progress:\n%s", want, progress.all())
	}
}

func TestHealthyClusterNamesNoProblem(t *testing.T) {
	w, client, progress := diagWaiter()
	createPods(t, client,
		pod("kube-system", "coredns-1", healthy(0)),
		pod("kube-system", "kube-proxy-x", healthy(4)), // restarted, recovered
		pod("kiln-system", "csr-approver-1", healthy(1)),
	)
	units := 0
	w.Units = func(context.Context) ([]platforms.FailedUnit, error) { units++; return nil, nil }
	w.Machines = func(context.Context) (map[string]platforms.MachineState, error) {
		return map[string]platforms.MachineState{"m-0": platforms.MachineRunning}, nil
	}
	err := w.BootstrapComplete(context.Background(), timesOut)
	if err == nil {
		t.Fatal("no timeout")
	}
	for _, s := range []string{progress.all(), err.Error()} {
		if strings.Contains(s, "crash-looping") || strings.Contains(s, "failed") || strings.Contains(s, "stopped") {
			t.Errorf("a healthy cluster reports a problem: %s", s)
		}
	}
	if !strings.Contains(err.Error(), "last state: 0 nodes registered") {
		t.Errorf("err = %v, want the plain progress", err)
	}
	if units != 1 {
		t.Errorf("failed units asked %d times in 50ms, want once per %s", units, unitsEvery)
	}
}

func TestProblemPriority(t *testing.T) {
	w, client, progress := diagWaiter()
	createPods(t, client, pod("kiln-system", "etcd-installer-master-0", crashLoop(5, "boom")))
	secretish := "E1123 kubelet: " + strings.Repeat("x", 300) + "\x1b[31m"
	w.Units = func(context.Context) ([]platforms.FailedUnit, error) {
		return []platforms.FailedUnit{
			{Machine: "c-master-1", Unit: "kubelet.service", LastLine: "later machine"},
			{Machine: "c-master-0", Unit: "kubelet.service", LastLine: "first line\n" + secretish},
		}, nil
	}
	stopped := true
	w.Machines = func(context.Context) (map[string]platforms.MachineState, error) {
		if stopped {
			return map[string]platforms.MachineState{"c-master-0": platforms.MachineRunning, "c-worker-0": platforms.MachineStopped}, nil
		}
		return map[string]platforms.MachineState{"c-master-0": platforms.MachineRunning}, nil
	}

	endpoint := "API load balancer: no backend passes its health check: 10.0.0.10:6443: context deadline exceeded\n"
	w.Endpoint = func(context.Context) string { return endpoint }

	err := w.BootstrapComplete(context.Background(), timesOut)
	if err == nil || !strings.Contains(err.Error(), "last state: machine c-worker-0 is stopped; ") {
		t.Errorf("a stopped machine does not come first: %v", err)
	}

	stopped = false
	err = w.BootstrapComplete(context.Background(), timesOut)
	if err == nil || !strings.Contains(err.Error(), "last state: API load balancer: no backend passes its health check: 10.0.0.10:6443: context deadline exceeded; 0 nodes registered") {
		t.Errorf("the API endpoint's problem does not come next: %v", err)
	}

	endpoint = ""
	err = w.BootstrapComplete(context.Background(), timesOut)
	want := "last state: machine c-master-0: unit kubelet.service failed: E1123 kubelet: " + strings.Repeat("x", maxLine-len("E1123 kubelet: ")) + "...; "
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant the first failed unit, its last line cut: %q", err, want)
	}
	if strings.Contains(progress.all(), "\x1b") {
		t.Error("a control character from a machine reached the state line")
	}

	w.Units = nil
	err = w.BootstrapComplete(context.Background(), timesOut)
	if err == nil || !strings.Contains(err.Error(), "last state: pod kiln-system/etcd-installer-master-0 crash-looping (5 restarts): boom; 0 nodes registered") {
		t.Errorf("err = %v, want the crash-looping pod", err)
	}
}

func TestInstallStillFailsFastOnStoppedMachine(t *testing.T) {
	w, client, _ := diagWaiter()
	createPods(t, client, pod("kiln-system", "etcd-installer-master-0", crashLoop(5, "boom")))
	w.Machines = func(context.Context) (map[string]platforms.MachineState, error) {
		return map[string]platforms.MachineState{"c-master-0": platforms.MachineStopped}, nil
	}
	err := w.InstallComplete(context.Background(), 1, 5*time.Second)
	var down *MachineDownError
	if !errors.As(err, &down) {
		t.Errorf("err = %v, want a *MachineDownError at once", err)
	}
}

// TestAPIWaitNamesEndpointProblem: while the API answers nothing useful,
// the API wait's state line and its timeout error name what the platform
// says about the endpoint, before the clients' own error.
func TestAPIWaitNamesEndpointProblem(t *testing.T) {
	var podLists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/pods") {
			podLists.Add(1)
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w, _, progress := diagWaiter()
	w.Client = client
	w.Poll = 5 * time.Millisecond
	w.Endpoint = func(context.Context) string {
		return "the API load balancer is not running (its log: /var/lib/kiln/lb/c/lb.log)"
	}
	_, err = w.API(context.Background(), srv.URL, timesOut)
	want := "last state: the API load balancer is not running (its log: /var/lib/kiln/lb/c/lb.log); API not ready: "
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to contain %q", err, want)
	}
	if !strings.Contains(progress.all(), want[len("last state: "):]) {
		t.Errorf("state lines %q do not name the endpoint's problem", progress.all())
	}

	// A certificate of --dir that expired comes first: nothing else
	// helps until it is renewed.
	w.Expired = func(time.Time) string { return "certificate tls/apiserver expired at 2026-12-05 10:00 UTC" }
	_, err = w.API(context.Background(), srv.URL, timesOut)
	if want := "last state: certificate tls/apiserver expired at 2026-12-05 10:00 UTC; API not ready: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("with an expired certificate: err = %v, want it to contain %q", err, want)
	}
	w.Expired = nil

	w.Endpoint = func(context.Context) string { return "" }
	_, err = w.API(context.Background(), srv.URL, timesOut)
	if err == nil || strings.Contains(err.Error(), "load balancer") {
		t.Errorf("with no endpoint problem: err = %v", err)
	}
	// With no API to list them from, the API wait looks for no
	// crash-looping pods.
	if n := podLists.Load(); n != 0 {
		t.Errorf("the API wait listed pods %d times", n)
	}
}

// TestInstallNamesPodThatDoesNotStart: a pod of kiln's scheduled minutes
// ago whose container is still being created is named with its node and
// the latest warning about it; a young one, or a user's, is not.
func TestInstallNamesPodThatDoesNotStart(t *testing.T) {
	w, client, progress := diagWaiter()
	// The waits judge the pod's age by their clock, stopped here (at a
	// whole second, as the API keeps timestamps).
	now := time.Now().Truncate(time.Second)
	w.Now = func() time.Time { return now }
	creating := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	old := metav1.NewTime(now.Add(-3 * time.Minute))
	stuck := pod("kube-system", "kube-proxy-dgxqb", creating)
	stuck.CreationTimestamp, stuck.Spec.NodeName = old, "worker-0"
	young := pod("kube-system", "kube-proxy-aaaaa", creating)
	young.CreationTimestamp = metav1.NewTime(now)
	user := pod("default", "app", creating)
	user.CreationTimestamp = old
	createPods(t, client, stuck, young, user)
	for i, e := range []struct {
		name, reason, message string
		at                    time.Time
	}{
		{"kube-proxy-dgxqb", "FailedScheduling", "an older warning", now.Add(-3 * time.Minute)},
		{"kube-proxy-dgxqb", "FailedMount", `MountVolume.SetUp failed for volume "lib-modules" : mkdir /lib/modules: read-only file system`, now.Add(-time.Minute)},
		{"kube-proxy-aaaaa", "FailedMount", "not this pod's", now},
	} {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "kube-system", Name: fmt.Sprintf("e%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: e.name},
			Type:           corev1.EventTypeWarning, Reason: e.reason, Message: e.message, LastTimestamp: metav1.NewTime(e.at),
		}
		if _, err := client.CoreV1().Events("kube-system").Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := w.InstallComplete(context.Background(), 1, timesOut)
	const want = `pod kube-system/kube-proxy-dgxqb on worker-0 not started after 3m0s: FailedMount: MountVolume.SetUp failed for volume "lib-modules" : mkdir /lib/modules: read-only file system`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to name %q", err, want)
	}
	if strings.Contains(progress.all(), "kube-proxy-aaaaa") || strings.Contains(progress.all(), "default/app") {
		t.Errorf("a young pod or a user's was named:\n%s", progress.all())
	}
}
