package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// pausedByUpgrade is the PausedByAnnotation value of the pools an upgrade
// paused.
const pausedByUpgrade = "kiln upgrade cluster"

// rolloutWait bounds the wait for a MachineConfig rollout under way to
// finish its node before an upgrade's first drain.
const rolloutWait = 15 * time.Minute

// Pools holds the cluster's MachineConfig rollouts while an upgrade
// drains and changes nodes: two drains at once (a pool's and the
// upgrade's) could leave fewer workers than the pools and the upgrade
// each allow, and a node's agent would change its config and its
// release at once.
type Pools struct {
	Dyn  dynamic.Interface
	Kube kubernetes.Interface
	// Poll is how often Hold checks the nodes; 2 s when zero.
	Poll time.Duration
	// Report gets what Hold waits for, every waitReport.
	Report func(string)
}

// Hold pauses every MachineConfigPool that is not paused, marking it as
// the upgrade's (PausedByAnnotation), then waits until no node is cordoned
// for a MachineConfig (a paused pool still finishes the nodes it
// started). A pool the user paused stays as it is. A cluster without the
// machine-config API has nothing to hold.
func (p *Pools) Hold(ctx context.Context) error {
	pools, err := p.list(ctx)
	if err != nil {
		return err
	}
	for _, u := range pools {
		if paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); paused {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"paused":true}}`, machineconfig.PausedByAnnotation, pausedByUpgrade)
		if _, err := p.Dyn.Resource(machineconfig.MachineConfigPools).Patch(ctx, u.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("pausing MachineConfigPool %s: %w", u.GetName(), err)
		}
	}
	poll := p.Poll
	if poll == 0 {
		poll = 2 * time.Second
	}
	deadline, last := time.Now().Add(rolloutWait), time.Time{}
	for {
		busy, err := p.rolling(ctx)
		if err == nil && len(busy) == 0 {
			return nil
		}
		what := "the MachineConfig rollout on " + strings.Join(busy, ", ") + " to finish"
		if err != nil {
			what = "the Nodes: " + err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s; the pools are paused (kubectl get mcp)", rolloutWait, what)
		}
		if p.Report != nil && time.Since(last) >= waitReport {
			p.Report("waiting for " + what)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// rolling returns the nodes the machine-config controller has cordoned.
func (p *Pools) rolling(ctx context.Context) ([]string, error) {
	nodes, err := p.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var busy []string
	for _, n := range nodes.Items {
		if !cordonedForConfig(&n) {
			continue
		}
		// A node its agent cannot bring to the config holds the upgrade
		// until someone mends it: say why.
		if a := n.Annotations; a[machineconfig.StateAnnotation] == machineconfig.StateDegraded {
			busy = append(busy, n.Name+" (Degraded: "+a[machineconfig.ReasonAnnotation]+")")
			continue
		}
		busy = append(busy, n.Name)
	}
	slices.Sort(busy)
	return busy, nil
}

func cordonedForConfig(n *corev1.Node) bool {
	return n.Annotations[machineconfig.CordonedAnnotation] != ""
}

// Release unpauses the pools Hold paused (those whose PausedByAnnotation
// is the upgrade's), whichever run paused them.
func (p *Pools) Release(ctx context.Context) error {
	pools, err := p.list(ctx)
	if err != nil {
		return err
	}
	for _, u := range pools {
		if u.GetAnnotations()[machineconfig.PausedByAnnotation] != pausedByUpgrade {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"paused":false}}`, machineconfig.PausedByAnnotation)
		if _, err := p.Dyn.Resource(machineconfig.MachineConfigPools).Patch(ctx, u.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("unpausing MachineConfigPool %s: %w", u.GetName(), err)
		}
	}
	return nil
}

// list returns the cluster's MachineConfigPools: none when it has no
// machine-config API (a cluster kiln made before it).
func (p *Pools) list(ctx context.Context) ([]unstructured.Unstructured, error) {
	pools, err := p.Dyn.Resource(machineconfig.MachineConfigPools).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the MachineConfigPools: %w", err)
	}
	return pools.Items, nil
}
