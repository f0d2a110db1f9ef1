package upgrade

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// pool is a MachineConfigPool object, paused or not, with annotations.
func pool(name string, paused bool, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": machineconfig.Group + "/" + machineconfig.Version, "kind": "MachineConfigPool",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"paused": paused},
	}}
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

// TestPoolsHoldAndRelease: Hold pauses the pools that run, marked as the
// upgrade's, and waits for the node a rollout cordoned to be done;
// Release unpauses what an upgrade paused (this run or a killed one) and
// leaves a pool the user paused as it was.
func TestPoolsHoldAndRelease(t *testing.T) {
	ctx := context.Background()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{machineconfig.MachineConfigPools: "MachineConfigPoolList"},
		pool("master", false, nil), pool("worker", true, nil),
		pool("infra", true, map[string]string{machineconfig.PausedByAnnotation: pausedByUpgrade}))
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Annotations: map[string]string{machineconfig.CordonedAnnotation: "rendered-worker-1"}}})
	var reports []string
	p := &Pools{Dyn: dyn, Kube: kube, Poll: time.Millisecond, Report: func(s string) { reports = append(reports, s) }}
	go func() {
		// The controller finishes w1 a little later.
		time.Sleep(50 * time.Millisecond)
		n, _ := kube.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		delete(n.Annotations, machineconfig.CordonedAnnotation)
		_, _ = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}()
	start := time.Now()
	if err := p.Hold(ctx); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 40*time.Millisecond || len(reports) == 0 || !strings.Contains(reports[0], "the MachineConfig rollout on w1 to finish") {
		t.Errorf("Hold did not wait for w1's rollout (after %s, reports %q)", time.Since(start), reports)
	}
	state := func() map[string]string {
		got := map[string]string{}
		for _, name := range []string{"master", "worker", "infra"} {
			u, err := dyn.Resource(machineconfig.MachineConfigPools).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
			got[name] = map[bool]string{true: "paused", false: "running"}[paused] + " by " + u.GetAnnotations()[machineconfig.PausedByAnnotation]
		}
		return got
	}
	want := map[string]string{"master": "paused by " + pausedByUpgrade, "worker": "paused by ", "infra": "paused by " + pausedByUpgrade}
	if got := state(); !maps.Equal(got, want) {
		t.Errorf("after Hold: %v, want %v", got, want)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"master": "running by ", "worker": "paused by ", "infra": "running by "}
	if got := state(); !maps.Equal(got, want) {
		t.Errorf("after Release: %v, want %v", got, want)
	}
}

// TestPoolsWithoutTheAPI: a cluster kiln made before the machine-config
// API has no pool to hold.
func TestPoolsWithoutTheAPI(t *testing.T) {
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{machineconfig.MachineConfigPools: "MachineConfigPoolList"})
	dyn.PrependReactor("list", "machineconfigpools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(machineconfig.MachineConfigPools.GroupResource(), "")
	})
	p := &Pools{Dyn: dyn, Kube: fake.NewClientset()}
	if err := p.Hold(context.Background()); err != nil {
		t.Errorf("Hold: %v", err)
	}
	if err := p.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestPoolsHoldNamesADegradedNode: a node the controller cordoned and
// whose agent is Degraded holds the upgrade, and the wait says why.
func TestPoolsHoldNamesADegradedNode(t *testing.T) {
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Annotations: map[string]string{
		machineconfig.CordonedAnnotation: "rendered-worker-1", machineconfig.StateAnnotation: machineconfig.StateDegraded,
		machineconfig.ReasonAnnotation: "/etc/motd differs"}}})
	p := &Pools{Kube: kube}
	busy, err := p.rolling(context.Background())
	if err != nil || len(busy) != 1 || busy[0] != "w1 (Degraded: /etc/motd differs)" {
		t.Errorf("rolling = %q, %v", busy, err)
	}
}
