package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// policyDeadline bounds how long a NetworkPolicy change may take to reach
// the nodes' rules: kube-router reacts to the watch event, so "within
// seconds" with room for a loaded 2-core host.
const policyDeadline = 20 * time.Second

// assertNetworkPolicy is what a user tries first: a server pod and two
// clients fetching from it every 250 ms, each time on a new connection -
// one on the server's node (bridged traffic) and one on another node
// (routed). A default-deny ingress NetworkPolicy in their namespace stops
// both within seconds; deleting it lets both through again. The times are
// logged as MEASURE lines.
func assertNetworkPolicy(ctx context.Context, t *testing.T, client kubernetes.Interface, infraID string) {
	t.Helper()
	const ns = "kiln-netpol-e2e"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	}()
	serverNode, otherNode := infraID+"-worker-0", infraID+"-master-0"
	newPod := func(name, node string, args ...string) *corev1.Pod {
		spec := probeSpec(map[string]string{"app": name}, args...)
		spec.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: spec.Labels}, Spec: spec.Spec}
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, newPod("server", serverNode, "--serve=:8080", "--body=policy e2e"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var serverIP string
	waitPod(ctx, t, client, ns, "server", func(p *corev1.Pod) bool {
		serverIP = p.Status.PodIP
		return p.Status.Phase == corev1.PodRunning && serverIP != ""
	})
	url := fmt.Sprintf("http://%s:8080/", serverIP)
	watchers := map[string]string{"same-node": serverNode, "other-node": otherNode}
	for name, node := range watchers {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, newPod(name, node, "--get="+url, "--every=250ms"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitWatchers(ctx, t, client, ns, watchers, "ok", 3*time.Minute)

	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	start := time.Now()
	if _, err := client.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWatchers(ctx, t, client, ns, watchers, "fail", policyDeadline)
	t.Logf("MEASURE default-deny enforced on both clients after %s", time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	if err := client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, deny.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWatchers(ctx, t, client, ns, watchers, "ok", policyDeadline)
	t.Logf("MEASURE traffic restored on both clients after %s", time.Since(start).Round(100*time.Millisecond))
}

// waitWatchers waits until the last line every watcher pod logged says
// want ("ok" or "fail"), and fails naming each watcher's last line when
// that takes longer than within.
func waitWatchers(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string, watchers map[string]string, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := map[string]string{}
	for {
		done := true
		for name := range watchers {
			last[name] = lastLogLine(ctx, client, ns, name)
			f := strings.Fields(last[name])
			done = done && len(f) >= 2 && f[1] == want
		}
		if done {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var b strings.Builder
			for name, node := range watchers {
				fmt.Fprintf(&b, "\n  %s (on %s): %q", name, node, last[name])
			}
			t.Fatalf("clients not %s within %s; last lines:%s", want, within, b.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// lastLogLine returns the last line pod name logged, or what kept it from
// being read.
func lastLogLine(ctx context.Context, client kubernetes.Interface, ns, name string) string {
	tail := int64(1)
	out, err := client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return "(log: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
