package waitfor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/internal/kubetest"
	"github.com/kiln-project/kiln/platforms"
)

// timesOut is the timeout of a wait that a test expects to run out. A
// wait keeps only what a check that finished before its deadline saw, so
// it is long enough for the first check to finish on a machine starved
// of CPU (a test run beside a build).
const timesOut = 300 * time.Millisecond

func waiter() (*Waiter, *fake.Clientset, *bytes.Buffer) {
	var out bytes.Buffer
	log := logrus.New()
	log.SetOutput(&out)
	client := fake.NewClientset()
	return &Waiter{Client: client, Log: log, Progress: platforms.NoProgress{}, Poll: 5 * time.Millisecond}, client, &out
}

func readyNode(name string, ready bool) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func TestBootstrapComplete(t *testing.T) {
	w, client, logs := waiter()
	ctx := context.Background()
	client.CoreV1().Nodes().Create(ctx, readyNode("m-0", false), metav1.CreateOptions{})
	// The installer pod exactly as bootkube creates it (etcdmembers.PodInstaller), once it has finished.
	installer := etcdmembers.InstallerPod("m-0", "kiln.local/pause:3.10")
	installer.Status.Phase = corev1.PodSucceeded
	client.CoreV1().Pods(installer.Namespace).Create(ctx, installer, metav1.CreateOptions{})
	go func() {
		time.Sleep(30 * time.Millisecond)
		client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap"}, Data: map[string]string{"status": "complete"},
		}, metav1.CreateOptions{})
	}()
	if err := w.BootstrapComplete(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Node m-0 registered", "etcd member m-0 added", "Bootstrap complete"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

func TestBootstrapTimeout(t *testing.T) {
	w, _, _ := waiter()
	err := w.BootstrapComplete(context.Background(), timesOut)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if !strings.Contains(err.Error(), "kiln gather bootstrap") {
		t.Errorf("error does not say how to proceed: %v", err)
	}
}

func TestInstallComplete(t *testing.T) {
	w, client, _ := waiter()
	ctx := context.Background()
	client.CoreV1().Nodes().Create(ctx, readyNode("m-0", true), metav1.CreateOptions{})
	client.CoreV1().Nodes().Create(ctx, readyNode("w-0", false), metav1.CreateOptions{})
	client.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Status:     appsv1.DaemonSetStatus{NumberReady: 2, DesiredNumberScheduled: 2},
	}, metav1.CreateOptions{})
	client.AppsV1().Deployments("kube-system").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}, metav1.CreateOptions{})
	renewLease(t, client, "m-0", time.Now())
	renewLease(t, client, "w-0", time.Now())
	// One node is not Ready: the wait times out as an install error.
	err := w.InstallComplete(ctx, 2, timesOut)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 of 2 nodes Ready; not up: w-0 (not Ready)") {
		t.Fatalf("err = %v", err)
	}
	client.CoreV1().Nodes().Update(ctx, readyNode("w-0", true), metav1.UpdateOptions{})
	if err := w.InstallComplete(ctx, 2, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	// A Ready node whose kubelet stopped renewing its lease is not up
	// (the waits' clock stands still, so that the age is exact on a
	// loaded machine).
	now := time.Now()
	w.Now = func() time.Time { return now }
	renewLease(t, client, "m-0", now)
	renewLease(t, client, "w-0", now.Add(-LeaseFresh-5*time.Second))
	err = w.InstallComplete(ctx, 2, timesOut)
	w.Now = nil
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not up: w-0 (kubelet lease renewed 25s ago)") {
		t.Fatalf("stale lease: err = %v", err)
	}
	client.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "w-0", metav1.DeleteOptions{})
	err = w.InstallComplete(ctx, 2, timesOut)
	if err == nil || !strings.Contains(err.Error(), "w-0 (no kubelet lease)") {
		t.Fatalf("no lease: err = %v", err)
	}
	renewLease(t, client, "w-0", time.Now())

	// After a restart, a lease still fresh but renewed before it is not
	// enough.
	w.RequireRenewalSince(time.Now())
	err = w.InstallComplete(ctx, 2, timesOut)
	if err == nil || !strings.Contains(err.Error(), "m-0 (kubelet lease not renewed since the start), w-0 (kubelet lease not renewed since the start)") {
		t.Fatalf("leases older than the start: err = %v", err)
	}
	renewLease(t, client, "m-0", time.Now())
	renewLease(t, client, "w-0", time.Now())
	if err := w.InstallComplete(ctx, 2, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	// With the NetworkPolicy controller installed, install-complete waits
	// until it runs on every node (without it, above, there is none to wait for).
	router := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-router"},
		Status:     appsv1.DaemonSetStatus{NumberReady: 1, DesiredNumberScheduled: 2},
	}
	client.AppsV1().DaemonSets("kube-system").Create(ctx, router, metav1.CreateOptions{})
	err = w.InstallComplete(ctx, 2, timesOut)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "NetworkPolicy controller (kube-router) not running on every node") {
		t.Fatalf("kube-router on 1 of 2 nodes: err = %v", err)
	}
	router.Status.NumberReady = 2
	client.AppsV1().DaemonSets("kube-system").Update(ctx, router, metav1.UpdateOptions{})
	if err := w.InstallComplete(ctx, 2, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	// A machine that does not run ends the wait at once, naming it, even
	// though its Node is Ready with a fresh lease.
	states := map[string]platforms.MachineState{"m-0": platforms.MachineStopped, "w-0": platforms.MachineRunning}
	w.Machines = func(context.Context) (map[string]platforms.MachineState, error) { return states, nil }
	start := time.Now()
	err = w.InstallComplete(ctx, 2, 5*time.Second)
	var down *MachineDownError
	if !errors.As(err, &down) || !strings.Contains(err.Error(), "machine m-0 is stopped") || strings.Contains(err.Error(), "w-0") {
		t.Fatalf("machine down: err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("a stopped machine was waited for %s", time.Since(start))
	}
	// An absent machine (not created yet) is waited for, and named.
	states["m-0"] = platforms.MachineAbsent
	states["w-1"] = platforms.MachineRunning
	err = w.InstallComplete(ctx, 2, timesOut)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 of 2 nodes Ready; not up: m-0 (machine absent), w-1 (not registered)") {
		t.Fatalf("machine absent: err = %v", err)
	}
	states["m-0"] = platforms.MachineRunning
	delete(states, "w-1")
	if err := w.InstallComplete(ctx, 2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// renewLease sets node's kubelet Lease's renew time.
func renewLease(t *testing.T, client *fake.Clientset, node string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: at}}}
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := client.CoordinationV1().Leases("kube-node-lease").Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInstallCompleteAddons: with the storage and metrics add-ons on,
// install-complete also waits for local-path-provisioner, metrics-server and
// the metrics APIService's Available condition, saying which one it waits
// for; with them off it does not look for them.
func TestInstallCompleteAddons(t *testing.T) {
	var available atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io" {
			http.NotFound(w, r)
			return
		}
		status, msg := "False", `failing or missing response from https://172.30.12.3:443/apis/metrics.k8s.io/v1beta1`
		if available.Load() {
			status, msg = "True", "all checks passed"
		}
		fmt.Fprintf(w, `{"kind":"APIService","status":{"conditions":[{"type":"Available","status":%q,"message":%q}]}}`, status, msg)
	}))
	defer srv.Close()
	w, client, logs := waiter()
	w.Client = kubetest.Serve(client, srv.URL)
	ctx := context.Background()
	client.CoreV1().Nodes().Create(ctx, readyNode("m-0", true), metav1.CreateOptions{})
	renewLease(t, client, "m-0", time.Now())
	client.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy"},
		Status:     appsv1.DaemonSetStatus{NumberReady: 1, DesiredNumberScheduled: 1},
	}, metav1.CreateOptions{})
	deploy := func(ns, name string) {
		client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Status: appsv1.DeploymentStatus{AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
		}, metav1.CreateOptions{})
	}
	deploy("kube-system", "coredns")
	if err := w.InstallComplete(ctx, 1, 5*time.Second); err != nil {
		t.Fatalf("add-ons off: %v", err)
	}

	w.Addons = types.Addons{Storage: true, Metrics: true, LoadBalancer: true, LoadBalancerIPs: []string{"192.0.2.200-192.0.2.210"}, APIVIP: "192.0.2.5"}
	var vipUp atomic.Bool
	w.VIP = func(context.Context) string {
		if vipUp.Load() {
			return ""
		}
		return "dial tcp 192.0.2.5:6443: connect: no route to host"
	}
	speaker := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "speaker", Namespace: "metallb-system"},
		Status: appsv1.DaemonSetStatus{NumberReady: 0, DesiredNumberScheduled: 1}}
	steps := []struct {
		want string
		next func()
	}{
		{"local-path-provisioner (default StorageClass) not available", func() { deploy("local-path-storage", "local-path-provisioner") }},
		{"metrics-server not available", func() { deploy("kube-system", "metrics-server") }},
		{"metrics API v1beta1.metrics.k8s.io not available: failing or missing response", func() { available.Store(true) }},
		{"MetalLB's controller (LoadBalancer addresses) not available", func() {
			deploy("metallb-system", "controller")
			client.AppsV1().DaemonSets("metallb-system").Create(ctx, speaker, metav1.CreateOptions{})
		}},
		{"MetalLB's speaker (LoadBalancer announcements) not running on every node", func() {
			speaker.Status.NumberReady = 1
			client.AppsV1().DaemonSets("metallb-system").UpdateStatus(ctx, speaker, metav1.UpdateOptions{})
		}},
		{"the API at its VIP 192.0.2.5 (MetalLB announces it for the Service kube-system/kiln-api) does not answer: dial tcp 192.0.2.5:6443: connect: no route to host", func() {
			vipUp.Store(true)
		}},
	}
	for _, s := range steps {
		// Long enough for a first check on a loaded machine: the wait must
		// time out having seen the add-on it is missing.
		err := w.InstallComplete(ctx, 1, 2*time.Second)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), s.want) {
			t.Fatalf("err = %v, want a timeout waiting for %q", err, s.want)
		}
		s.next()
	}
	if err := w.InstallComplete(ctx, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the default StorageClass, metrics-server, MetalLB and the API at its VIP 192.0.2.5 available") {
		t.Errorf("log does not name the add-ons:\n%s", logs)
	}
}
