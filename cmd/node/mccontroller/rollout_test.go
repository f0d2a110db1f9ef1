package mccontroller

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// node is a Ready worker running current (and desired) with state Done.
func node(name, current string) Node {
	return Node{Name: name, Ready: true, Labels: map[string]string{nodelayout.RoleLabel: "worker"}, Annotations: map[string]string{
		machineconfig.CurrentConfigAnnotation: current, machineconfig.DesiredConfigAnnotation: current, machineconfig.StateAnnotation: machineconfig.StateDone,
	}}
}

func with(n Node, kv ...string) Node {
	a := map[string]string{}
	for k, v := range n.Annotations {
		a[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		a[kv[i]] = kv[i+1]
	}
	n.Annotations = a
	return n
}

func pool(name string, maxUnavailable int32, paused bool) machineconfig.MachineConfigPool {
	p := machineconfig.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Paused = paused
	if maxUnavailable > 0 {
		p.Spec.MaxUnavailable = &maxUnavailable
	}
	return p
}

func acts(a []Action) string {
	var s []string
	for _, x := range a {
		s = append(s, fmt.Sprintf("%s:%s", x.Kind, x.Node))
	}
	return strings.Join(s, " ")
}

func TestPlan(t *testing.T) {
	const old, target = "rendered-worker-old", "rendered-worker-new"
	drained := func(n Node) Node { n.Unschedulable = true; return with(n, machineconfig.CordonedAnnotation, target) }
	for _, tc := range []struct {
		name    string
		pool    machineconfig.MachineConfigPool
		nodes   []Node
		healthy bool
		want    string
	}{
		{"one at a time by default", pool("worker", 0, false), []Node{node("w2", old), node("w1", old), node("w3", old)}, true, "drain:w1"},
		{"maxUnavailable 2", pool("worker", 2, false), []Node{node("w1", old), node("w2", old), node("w3", old)}, true, "drain:w1 drain:w2"},
		{"a drain in progress goes on and holds the budget", pool("worker", 0, false), []Node{drained(node("w1", old)), node("w2", old)}, true, "drain:w1"},
		{"a node applying holds the budget", pool("worker", 0, false), []Node{with(node("w1", old), machineconfig.DesiredConfigAnnotation, target), node("w2", old)}, true, ""},
		{"an updated node is uncordoned and the next starts", pool("worker", 0, false), []Node{drained(node("w1", target)), node("w2", old)}, true, "uncordon:w1"},
		{"an uncordoned updated node frees the budget", pool("worker", 0, false), []Node{node("w1", target), node("w2", old)}, true, "drain:w2"},
		{"a node not Ready holds the budget", pool("worker", 0, false), []Node{func() Node { n := node("w1", target); n.Ready = false; return n }(), node("w2", old)}, true, ""},
		{"a degraded node holds the budget", pool("worker", 0, false), []Node{with(node("w1", target), machineconfig.StateAnnotation, machineconfig.StateDegraded), node("w2", old)}, true, ""},
		{"a node stuck on a config that is gone moves on without budget", pool("worker", 0, false), []Node{with(node("w1", old), machineconfig.DesiredConfigAnnotation, "rendered-worker-gone", machineconfig.StateAnnotation, machineconfig.StateDegraded), node("w2", old)}, true, "drain:w1"},
		{"paused: nothing starts, a finished node is uncordoned", pool("worker", 0, true), []Node{drained(node("w1", target)), node("w2", old)}, true, "uncordon:w1"},
		{"a node that joined with its pool's config gets no drain", pool("worker", 0, false), []Node{with(node("w9", target), machineconfig.DesiredConfigAnnotation, ""), node("w1", target)}, true, "set-desired:w9"},
		{"fresh nodes get the config at once", pool("worker", 0, false), []Node{{Name: "w9", Ready: true, Annotations: map[string]string{}}, node("w1", old)}, true, "set-desired:w9 drain:w1"},
		{"masters wait for health", pool("master", 3, false), []Node{node("m1", old), node("m2", old)}, false, ""},
		{"masters one at a time whatever maxUnavailable says", pool("master", 3, false), []Node{node("m1", old), node("m2", old)}, true, "drain:m1"},
		{"all updated: nothing", pool("worker", 0, false), []Node{node("w1", target)}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := acts(Plan(tc.pool, target, tc.nodes, tc.healthy)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPoolOf(t *testing.T) {
	infra := pool("infra", 0, false)
	infra.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"infra": "yes"}}
	pools := []machineconfig.MachineConfigPool{pool("master", 0, false), pool("worker", 0, false), infra}
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{nodelayout.RoleLabel: "master", "infra": "yes"}, "master"},
		{map[string]string{nodelayout.RoleLabel: "worker"}, "worker"},
		{map[string]string{nodelayout.RoleLabel: "worker", "infra": "yes"}, "infra"},
		{map[string]string{"infra": "yes"}, ""},
	} {
		if got := PoolOf(Node{Labels: tc.labels}, pools); got != tc.want {
			t.Errorf("%v: pool %q, want %q", tc.labels, got, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	const target = "rendered-worker-new"
	nodes := []Node{node("w1", target), with(node("w2", "old"), machineconfig.StateAnnotation, machineconfig.StateDegraded, machineconfig.ReasonAnnotation, "files changed: /etc/x (content)")}
	st := Status(pool("worker", 0, false), target, nodes, nil)
	if st.MachineCount != 2 || st.UpdatedMachineCount != 1 || st.DegradedMachineCount != 1 || st.UnavailableMachineCount != 1 || st.ReadyMachineCount != 1 {
		t.Errorf("counts %+v", st)
	}
	cond := map[string]metav1.Condition{}
	for _, c := range st.Conditions {
		cond[c.Type] = c
	}
	if c := cond[machineconfig.ConditionDegraded]; c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "w2: files changed: /etc/x") {
		t.Errorf("Degraded %+v", c)
	}
	if cond[machineconfig.ConditionUpdating].Status != metav1.ConditionTrue || cond[machineconfig.ConditionUpdated].Status != metav1.ConditionFalse {
		t.Errorf("conditions %+v", st.Conditions)
	}
}

func TestStatusOfADegradedPoolAtItsTarget(t *testing.T) {
	const target = "rendered-worker-new"
	nodes := []Node{node("w1", target), with(node("w2", target), machineconfig.StateAnnotation, machineconfig.StateDegraded)}
	for _, c := range Status(pool("worker", 0, false), target, nodes, nil).Conditions {
		want := metav1.ConditionFalse
		if c.Type == machineconfig.ConditionDegraded {
			want = metav1.ConditionTrue
		}
		if c.Status != want {
			t.Errorf("%s = %s, want %s (nothing is moving; a node is degraded)", c.Type, c.Status, want)
		}
	}
}
