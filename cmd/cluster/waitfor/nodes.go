package waitfor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/platforms"
)

// LeaseFresh is how recently a node's kubelet must have renewed its Lease
// (namespace kube-node-lease) for the node to count as up. kubelet renews
// every 10 s (a quarter of nodeLeaseDurationSeconds, 40 s by default), so
// 20 s tolerates one late renewal and still notices a dead kubelet well
// before the node controller marks the node NotReady (its grace period is
// 40 s; until then a dead node's Ready condition is stale but True). The
// renew time is the node's clock and is compared with the host's: the
// local platform's machines share the host's clock; elsewhere the nodes
// must be time-synchronised with the host running kiln.
const LeaseFresh = 20 * time.Second

// nodeLeaseNamespace holds one Lease per node, renewed by its kubelet.
const nodeLeaseNamespace = "kube-node-lease"

// MachineStates reports the platform's view of each node's machine, by
// node name; platforms.MachineStater provides it.
type MachineStates func(ctx context.Context) (map[string]platforms.MachineState, error)

// MachineDownError is a node whose machine does not run: it will not come
// back by waiting.
type MachineDownError struct {
	// Machines are the machines that do not run, with their states.
	Machines map[string]platforms.MachineState
}

// Error names every machine that is down.
func (e *MachineDownError) Error() string {
	names := make([]string, 0, len(e.Machines))
	for n := range e.Machines {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("machine %s is %s", n, e.Machines[n])
	}
	return strings.Join(parts, ", ") + ": start the cluster again with `kiln start cluster`"
}

// nodeCount is what one look at the nodes found.
type nodeCount struct {
	up   int
	down []string // "<node> (<why>)", sorted by node
}

// detail says how many nodes are up of want, and which are not, why.
func (n nodeCount) detail(want int) string {
	s := fmt.Sprintf("%d of %d nodes Ready", n.up, want)
	if len(n.down) > 0 {
		s += "; not up: " + strings.Join(n.down, ", ")
	}
	return s
}

// countNodes counts the nodes that are up: Ready, their kubelet's Lease
// renewed within LeaseFresh, and, when the platform can tell, their
// machine running. A stopped machine will not start by waiting: it is a
// *MachineDownError. An absent one may not be created yet (a wait-for run
// beside create cluster): its node is just not up.
func (w *Waiter) countNodes(ctx context.Context, now time.Time) (nodeCount, error) {
	var c nodeCount
	var states map[string]platforms.MachineState
	if w.Machines != nil {
		var err error
		if states, err = w.Machines(ctx); err != nil {
			return c, fmt.Errorf("machine states: %w", err)
		}
		stopped := map[string]platforms.MachineState{}
		for n, st := range states {
			if st == platforms.MachineStopped {
				stopped[n] = st
			}
		}
		if len(stopped) > 0 {
			return c, &MachineDownError{Machines: stopped}
		}
	}
	nodes, err := w.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return c, err
	}
	leases, err := w.Client.CoordinationV1().Leases(nodeLeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return c, err
	}
	renewed := map[string]time.Time{}
	for _, l := range leases.Items {
		if l.Spec.RenewTime != nil {
			renewed[l.Name] = l.Spec.RenewTime.Time
		}
	}
	why := map[string]string{}
	for n, st := range states {
		if st != platforms.MachineRunning {
			why[n] = "machine " + string(st)
		} else {
			why[n] = "not registered"
		}
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		at, ok := renewed[n.Name]
		switch {
		case states != nil && states[n.Name] != "" && states[n.Name] != platforms.MachineRunning:
			// why[n.Name] says it.
		case !nodeReady(n):
			why[n.Name] = "not Ready"
		case !ok:
			why[n.Name] = "no kubelet lease"
		case now.Sub(at) > LeaseFresh:
			why[n.Name] = fmt.Sprintf("kubelet lease renewed %s ago", now.Sub(at).Round(time.Second))
		case at.Before(w.since):
			why[n.Name] = "kubelet lease not renewed since the start"
		default:
			delete(why, n.Name)
			c.up++
		}
	}
	for n, reason := range why {
		c.down = append(c.down, n+" ("+reason+")")
	}
	sort.Strings(c.down)
	return c, nil
}
