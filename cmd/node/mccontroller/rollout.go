package mccontroller

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Node is what the rollout needs of a Node.
type Node struct {
	Name          string
	Labels        map[string]string
	Annotations   map[string]string
	Unschedulable bool
	Ready         bool
}

func (n Node) current() string { return n.Annotations[machineconfig.CurrentConfigAnnotation] }
func (n Node) desired() string { return n.Annotations[machineconfig.DesiredConfigAnnotation] }
func (n Node) state() string   { return n.Annotations[machineconfig.StateAnnotation] }
func (n Node) cordoned() bool  { return n.Annotations[machineconfig.CordonedAnnotation] != "" }

// fresh is a node the controller never gave a config: it joined since,
// with the install-time config only or with its pool's config of the time
// it joined (machineconfig.FirstBoot).
func (n Node) fresh() bool { return n.desired() == "" }

// updated is a node that runs target.
func (n Node) updated(target string) bool {
	return n.current() == target && n.desired() == target && n.state() == machineconfig.StateDone
}

// unavailable is a node that counts against maxUnavailable: updating,
// not Done, not Ready, or cordoned.
func (n Node) unavailable() bool {
	return n.desired() != n.current() || n.state() != machineconfig.StateDone || !n.Ready || n.Unschedulable || n.cordoned()
}

// PoolOf returns the pool node belongs to: master or worker by its role
// label, or for a worker the first custom pool (by name) whose
// nodeSelector matches it. "" for a node of no pool (no role label).
func PoolOf(node Node, pools []machineconfig.MachineConfigPool) string {
	switch node.Labels[nodelayout.RoleLabel] {
	case machineconfig.MasterPool:
		return machineconfig.MasterPool
	case machineconfig.WorkerPool:
	default:
		return ""
	}
	sorted := slices.Clone(pools)
	slices.SortFunc(sorted, func(a, b machineconfig.MachineConfigPool) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		if p.Name == machineconfig.MasterPool || p.Name == machineconfig.WorkerPool || p.Spec.NodeSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(node.Labels)) {
			return p.Name
		}
	}
	return machineconfig.WorkerPool
}

// Action is one step the controller takes on a node.
type Action struct {
	Node string
	Kind ActionKind
}

// ActionKind is what an Action does.
type ActionKind string

// The actions, in the order a node goes through them.
const (
	// Drain cordons the node (marking it as the controller's) and evicts
	// its pods; once none is left the controller sets its desired config.
	Drain ActionKind = "drain"
	// SetDesired points the node at the target without a drain: a node
	// that has applied no config yet.
	SetDesired ActionKind = "set-desired"
	// Uncordon makes a node the controller cordoned schedulable again once
	// it runs the target and is Ready.
	Uncordon ActionKind = "uncordon"
)

// Plan decides the next actions for pool's nodes (all in the pool) moving
// to target: nodes that never had a config get it at once; a node the
// controller cordoned and that runs the target is uncordoned; nodes being
// drained go on; and while fewer than maxUnavailable nodes are
// unavailable and the pool is not paused, the next nodes by name start a
// drain (a node unavailable already starts without waiting for that). The master pool moves one node at a time and only while healthy
// (the API ready and every master Ready).
func Plan(pool machineconfig.MachineConfigPool, target string, nodes []Node, healthy bool) []Action {
	if target == "" {
		return nil
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	var acts []Action
	unavailable := 0
	var candidates []Node
	for _, n := range sorted {
		switch {
		case n.fresh():
			acts = append(acts, Action{n.Name, SetDesired})
			continue
		case n.updated(target) && n.cordoned():
			if n.Ready {
				acts = append(acts, Action{n.Name, Uncordon})
			}
		case n.desired() != target && n.cordoned():
			acts = append(acts, Action{n.Name, Drain})
		case n.desired() != target:
			candidates = append(candidates, n)
		}
		if n.unavailable() {
			unavailable++
		}
	}
	if pool.Spec.Paused {
		return acts
	}
	if pool.Name == machineconfig.MasterPool && !healthy {
		return acts
	}
	// A node that is unavailable already (not Ready, degraded, stuck on a
	// config that is gone) moves without taking from the budget: waiting
	// for it would hold the pool for ever.
	budget := int(MaxUnavailable(pool)) - unavailable
	for _, n := range candidates {
		switch {
		case n.unavailable():
			acts = append(acts, Action{n.Name, Drain})
		case budget > 0:
			acts = append(acts, Action{n.Name, Drain})
			budget--
		}
	}
	return acts
}

// MaxUnavailable is the pool's limit: 1 unless set, always 1 for master.
func MaxUnavailable(pool machineconfig.MachineConfigPool) int32 {
	if pool.Name == machineconfig.MasterPool || pool.Spec.MaxUnavailable == nil || *pool.Spec.MaxUnavailable < 1 {
		return 1
	}
	return *pool.Spec.MaxUnavailable
}

// Status counts pool's nodes for target and sets its conditions;
// renderErr is why the pool's MachineConfigs could not be rendered.
func Status(pool machineconfig.MachineConfigPool, target string, nodes []Node, renderErr error) machineconfig.PoolStatus {
	st := machineconfig.PoolStatus{ObservedGeneration: pool.Generation, Configuration: target, MachineCount: int32(len(nodes))}
	var degraded []string
	configured := 0
	for _, n := range nodes {
		if n.current() == target && n.desired() == target {
			configured++
		}
		if n.updated(target) {
			st.UpdatedMachineCount++
			if n.Ready && !n.Unschedulable {
				st.ReadyMachineCount++
			}
		}
		if n.unavailable() {
			st.UnavailableMachineCount++
		}
		if n.state() == machineconfig.StateDegraded {
			st.DegradedMachineCount++
			degraded = append(degraded, fmt.Sprintf("%s: %s", n.Name, n.Annotations[machineconfig.ReasonAnnotation]))
		}
	}
	slices.Sort(degraded)
	allUpdated := st.UpdatedMachineCount == st.MachineCount
	cond := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		c := metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: pool.Generation}
		for _, old := range pool.Status.Conditions {
			if old.Type == t && old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		st.Conditions = append(st.Conditions, c)
	}
	switch {
	case allUpdated:
		cond(machineconfig.ConditionUpdated, true, "AllNodesUpdated", fmt.Sprintf("all %d nodes run %s", st.MachineCount, target))
		cond(machineconfig.ConditionUpdating, false, "AllNodesUpdated", "")
	case configured == len(nodes):
		cond(machineconfig.ConditionUpdated, false, "NodesDegraded", fmt.Sprintf("%d of %d nodes run %s; the others are degraded", st.UpdatedMachineCount, st.MachineCount, target))
		cond(machineconfig.ConditionUpdating, false, "NodesDegraded", "")
	case pool.Spec.Paused:
		cond(machineconfig.ConditionUpdated, false, "Paused", fmt.Sprintf("%d of %d nodes run %s; the pool is paused", st.UpdatedMachineCount, st.MachineCount, target))
		cond(machineconfig.ConditionUpdating, false, "Paused", "")
	default:
		cond(machineconfig.ConditionUpdated, false, "Updating", fmt.Sprintf("%d of %d nodes run %s", st.UpdatedMachineCount, st.MachineCount, target))
		cond(machineconfig.ConditionUpdating, true, "Updating", fmt.Sprintf("moving to %s", target))
	}
	cond(machineconfig.ConditionDegraded, len(degraded) > 0, "NodesDegraded", strings.Join(degraded, "; "))
	if renderErr != nil {
		cond(machineconfig.ConditionRenderDegraded, true, "RenderFailed", renderErr.Error())
	} else {
		cond(machineconfig.ConditionRenderDegraded, false, "Rendered", "")
	}
	return st
}
