package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
)

// UnhealthyError is why a cluster is not fit to upgrade: every problem
// found, each naming its node, member or pod.
type UnhealthyError struct {
	Problems []string
}

func (e *UnhealthyError) Error() string {
	return "the cluster is not healthy, so kiln changes nothing:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// Observed is what Healthy and Inventory read of a cluster, asked for once.
type Observed struct {
	Nodes []corev1.Node
	// ControlPlane are the masters' static pods (tier=control-plane).
	ControlPlane []corev1.Pod
	// Etcd is etcdmembers.Check's answer for every member.
	Etcd []etcdmembers.Health
}

// Observe lists the cluster's nodes and control-plane pods; etcd is
// etcdmembers.Check's answer for every member.
func Observe(ctx context.Context, kube kubernetes.Interface, etcd []etcdmembers.Health) (Observed, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Observed{}, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: controlPlaneSelector})
	if err != nil {
		return Observed{}, fmt.Errorf("listing the control-plane pods: %w", err)
	}
	return Observed{Nodes: nodes.Items, ControlPlane: pods.Items, Etcd: etcd}, nil
}

// Healthy returns nil when every node of o is Ready, every etcd member is a
// voting member that answered without an alarm or error, and each master
// runs a Ready pod of each of its control-plane components; else an
// *UnhealthyError naming every problem.
func Healthy(o Observed) error {
	var problems []string
	for _, n := range o.Nodes {
		if why := notReady(n.Status.Conditions, string(corev1.NodeReady)); why != "" {
			problems = append(problems, fmt.Sprintf("node %s: %s", n.Name, why))
		}
		if _, master := n.Labels[handover.ControlPlaneLabel]; master {
			problems = append(problems, controlPlaneProblems(n.Name, o.ControlPlane)...)
		}
	}
	if len(o.Etcd) == 0 {
		problems = append(problems, "etcd: no member listed")
	}
	for _, h := range o.Etcd {
		name := h.Member.Name
		switch {
		case h.Member.IsLearner:
			problems = append(problems, fmt.Sprintf("etcd member %s: a learner (its join has not finished)", name))
		case h.Err != nil:
			problems = append(problems, fmt.Sprintf("etcd member %s: no answer (%v)", name, h.Err))
		case len(h.Status.Errors) > 0:
			problems = append(problems, fmt.Sprintf("etcd member %s: %s", name, strings.Join(h.Status.Errors, "; ")))
		}
	}
	if len(problems) > 0 {
		return &UnhealthyError{Problems: problems}
	}
	return nil
}

// controlPlaneProblems names each control-plane component of master that
// has no pod there, or whose pod is not Ready.
func controlPlaneProblems(master string, pods []corev1.Pod) []string {
	var out []string
	for _, c := range masterComponents {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
			return p.Spec.NodeName == master && p.Labels[componentLabel] == string(c)
		})
		if i < 0 {
			out = append(out, fmt.Sprintf("%s: no %s pod", master, c))
			continue
		}
		p := pods[i]
		if why := podNotReady(p); why != "" {
			out = append(out, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, why))
		}
	}
	return out
}

// notReady is why the condition typ of a node is not True, "" when it is.
func notReady(conds []corev1.NodeCondition, typ string) string {
	for _, c := range conds {
		if string(c.Type) == typ {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return fmt.Sprintf("not %s (%s: %s)", typ, c.Reason, c.Message)
		}
	}
	return "no " + typ + " condition yet"
}

// podNotReady is why a pod is not Ready, naming a waiting or crashing
// container; "" when it is Ready.
func podNotReady(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	why := "not Ready (" + string(p.Status.Phase) + ")"
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			why += fmt.Sprintf("; %s: %s, %d restarts", cs.Name, w.Reason, cs.RestartCount)
		}
		if t := cs.LastTerminationState.Terminated; t != nil && cs.State.Running == nil {
			why += fmt.Sprintf("; %s last exited %d: %s", cs.Name, t.ExitCode, lastLine(t.Message))
		}
	}
	return why
}

// maxMessage is how much of a container's termination message an error
// quotes.
const maxMessage = 300

// lastLine is the last non-empty line of a termination message (the end
// of the container's log, under FallbackToLogsOnError), at most
// maxMessage bytes of it.
func lastLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > maxMessage {
		l = "…" + strings.ToValidUTF8(l[len(l)-maxMessage:], "")
	}
	return l
}
