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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/cmd/internal/node/bootkube"
	"github.com/kiln-project/kiln/platforms"
)

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
	// The installer pod exactly as bootkube creates it, once it has finished.
	installer := bootkube.InstallerPod("m-0", "kiln.local/pause:3.10")
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
	err := w.BootstrapComplete(context.Background(), 30*time.Millisecond)
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
	// One node is not Ready: the wait times out as an install error.
	err := w.InstallComplete(ctx, 2, 40*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 of 2 nodes Ready") {
		t.Fatalf("err = %v", err)
	}
	client.CoreV1().Nodes().Update(ctx, readyNode("w-0", true), metav1.UpdateOptions{})
	if err := w.InstallComplete(ctx, 2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// withDiscovery is a fake clientset whose discovery (and raw REST) client
// talks to a test server: the fake has no REST client for APIServices.
type withDiscovery struct {
	*fake.Clientset
	d discovery.DiscoveryInterface
}

func (c withDiscovery) Discovery() discovery.DiscoveryInterface { return c.d }

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
	w.Client = withDiscovery{client, discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1})}
	ctx := context.Background()
	client.CoreV1().Nodes().Create(ctx, readyNode("m-0", true), metav1.CreateOptions{})
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

	w.Addons = types.Addons{Storage: true, Metrics: true}
	steps := []struct {
		want string
		next func()
	}{
		{"local-path-provisioner (default StorageClass) not available", func() { deploy("local-path-storage", "local-path-provisioner") }},
		{"metrics-server not available", func() { deploy("kube-system", "metrics-server") }},
		{"metrics API v1beta1.metrics.k8s.io not available: failing or missing response", func() { available.Store(true) }},
	}
	for _, s := range steps {
		err := w.InstallComplete(ctx, 1, 200*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), s.want) {
			t.Fatalf("err = %v, want a timeout waiting for %q", err, s.want)
		}
		s.next()
	}
	if err := w.InstallComplete(ctx, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the default StorageClass and metrics-server available") {
		t.Errorf("log does not name the add-ons:\n%s", logs)
	}
}
