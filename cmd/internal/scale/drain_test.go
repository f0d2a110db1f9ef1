package scale

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
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
