package scale

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubectl/pkg/drain"
)

func TestHeldByBudgetsNamesThePodAndTheBudget(t *testing.T) {
	one := intstr.FromInt32(1)
	pod := func(name, node string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	}
	budget := func(name string, allowed int32) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 2},
		}
	}
	client := fake.NewClientset(
		pod("web-1", "worker-0", map[string]string{"app": "web"}),
		pod("db-1", "worker-0", map[string]string{"app": "db"}),
		pod("web-2", "worker-1", map[string]string{"app": "web"}),
		budget("web", 0), budget("db", 1),
	)
	got := heldByBudgets(context.Background(), client, "worker-0")
	want := "pod default/web-1 is held by PodDisruptionBudget web (1 of 2 pods healthy, 1 needed, 0 disruptions allowed)"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := heldByBudgets(context.Background(), client, "worker-2"); got != "" {
		t.Errorf("a node without pods: %q", got)
	}
}

// TestTerminatingNamesThePodAndTheKubelet: a drain whose evicted pod is
// not gone says how long it has been terminating, what its containers
// do, and whether its node's kubelet is alive to stop it.
func TestTerminatingNamesThePodAndTheKubelet(t *testing.T) {
	now := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	deleted := metav1.NewTime(now.Add(-4*time.Minute - 50*time.Second))
	renewed := metav1.NewMicroTime(now.Add(-3 * time.Second))
	client := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "approver-1", Namespace: "kiln-system", DeletionTimestamp: &deleted, Finalizers: []string{"x"}},
			Spec:   corev1.PodSpec{NodeName: "master-0"},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "approver", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "master-0"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "master-0", Namespace: corev1.NamespaceNodeLease}, Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}},
	)
	got := terminating(context.Background(), client, "master-0", now)
	want := "pod kiln-system/approver-1 has been terminating for 4m50s (approver running); node master-0: Ready True (KubeletReady), kubelet lease renewed 3s ago"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := terminating(context.Background(), client, "worker-0", now); got != "" {
		t.Errorf("a node without terminating pods: %q", got)
	}
}

func TestDrainRetriesATransientAPIErrorOnly(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}
	tests := []struct {
		name      string
		errs      []error // what each pass returns, then nil
		wantCalls int
		wantErr   string
	}{
		{"a connection cut mid-eviction, then done",
			[]error{errors.New(`error when evicting pods/"echo-1" -n "default": Post "https://10.0.0.1:6443/api/v1/namespaces/default/pods/echo-1/eviction": unexpected EOF`)},
			2, ""},
		{"an API server restarting twice, then done",
			[]error{errors.New(`Get "https://10.0.0.1:6443/api/v1/pods": dial tcp 10.0.0.1:6443: connect: connection refused`),
				errors.New(`the server is currently unable to handle the request`)},
			3, ""},
		{"a pod no controller manages: no retry",
			[]error{errors.New(`cannot delete Pods that declare no controller (use --force to override): default/lone`)},
			1, "cannot delete Pods that declare no controller"},
		{"the drain's own timeout: no retry",
			[]error{errors.New(`error when evicting pods/"echo-1" -n "default": global timeout reached: 5m0s`)},
			1, "global timeout reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			d := &Drainer{Client: fake.NewClientset(node), Timeout: time.Minute, Log: logrus.New(),
				run: func(h *drain.Helper, name string) error {
					calls++
					if h.Timeout <= 0 || h.Timeout > time.Minute {
						t.Errorf("pass %d: the drain's timeout is %s, want what is left of 1m", calls, h.Timeout)
					}
					if calls <= len(tt.errs) {
						return tt.errs[calls-1]
					}
					return nil
				}}
			err := d.Drain(context.Background(), "worker-0")
			if calls != tt.wantCalls {
				t.Errorf("%d passes, want %d", calls, tt.wantCalls)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
