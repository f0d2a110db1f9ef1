package scale

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/platforms"
)

// addWorker creates the worker's machine, which fetches /config/worker
// from the masters' machine-config servers and joins through kubelet TLS
// bootstrap, and waits for its Node to be Ready. The bootstrap token its
// config carries is made valid again for the join when it expired.
func (r *Runner) addWorker(ctx context.Context, name string) error {
	r.Cluster.Shape.Workers = with(r.Cluster.Shape.Workers, name)
	if err := r.enroll(ctx, name); err != nil {
		return err
	}
	minted, err := r.createMachine(ctx)
	if err != nil {
		return err
	}
	return r.joined(ctx, name, minted)
}

// joined waits for the new machine's Node to be Ready, then deletes the
// join token when it was made for this join (minted).
func (r *Runner) joined(ctx context.Context, name string, minted bool) error {
	if err := r.waitNodeReady(ctx, name); err != nil {
		return err
	}
	if minted {
		return r.dropToken(ctx)
	}
	return nil
}

// createMachine records the shape (a new machine in it), makes the join
// token valid and creates the machine. minted reports whether the token
// was made for this join.
func (r *Runner) createMachine(ctx context.Context) (minted bool, err error) {
	if err := r.record(nil); err != nil {
		return false, err
	}
	if minted, err = r.ensureToken(ctx); err != nil {
		return false, err
	}
	return minted, r.Machines.ApplyMachines(ctx, r.Cluster)
}

// removeWorker cordons and drains the worker (PodDisruptionBudgets
// respected unless --force), deletes its Node and destroys its machine.
// Its removal is recorded first, so that a re-run finishes it.
func (r *Runner) removeWorker(ctx context.Context, name string) error {
	if err := r.record([]string{name}); err != nil {
		return err
	}
	if err := r.step("Draining "+name, func() error { return r.drainIfPresent(ctx, name) }); err != nil {
		return err
	}
	if err := r.deleteNode(ctx, name); err != nil {
		return err
	}
	r.Cluster.Shape.Workers = without(r.Cluster.Shape.Workers, name)
	if err := r.Machines.ApplyMachines(ctx, r.Cluster); err != nil {
		return err
	}
	if err := r.unenroll(ctx, name); err != nil {
		return err
	}
	return r.record(nil)
}

// drainIfPresent drains node unless its Node is gone already.
func (r *Runner) drainIfPresent(ctx context.Context, node string) error {
	if _, err := r.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return r.Drain(ctx, node)
}

// deleteNode deletes the Node; one already gone is fine.
func (r *Runner) deleteNode(ctx context.Context, name string) error {
	return r.step("Deleting Node "+name, func() error {
		err := r.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// waitNodeReady waits for the Node name to register and be Ready, naming
// its machine's state when it is not running.
func (r *Runner) waitNodeReady(ctx context.Context, name string) error {
	return r.until(ctx, r.joinTimeout(), "Waiting for Node "+name+" to be Ready", func(ctx context.Context) (bool, string, error) {
		n, err := r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, r.machineNote(ctx, name, "not registered yet"), nil
		}
		if err != nil {
			return false, "API: " + err.Error(), nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, "", nil
				}
				return false, fmt.Sprintf("Ready=%s: %s", c.Status, c.Message), nil
			}
		}
		return false, "no Ready condition yet", nil
	})
}

// machineNote adds the machine's state to what a wait reports, when the
// platform can tell and the machine does not run.
func (r *Runner) machineNote(ctx context.Context, name, state string) string {
	ms, ok := r.Machines.(platforms.MachineStater)
	if !ok {
		return state
	}
	states, err := ms.MachineStates(ctx, r.Cluster)
	if err != nil || states[name] == platforms.MachineRunning || states[name] == "" {
		return state
	}
	return fmt.Sprintf("%s (machine %s is %s)", state, name, states[name])
}
