package scale

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
)

// addWorker creates the worker's machine from the full worker config with
// a join token of its own, at the release the cluster runs (bootRelease),
// waits for its Node to register, retires the token, and waits for the
// Node to be Ready with its kubelet at that release.
func (r *Runner) addWorker(ctx context.Context, name string) error {
	rel, err := r.bootRelease(ctx, name, false)
	if err != nil {
		return err
	}
	r.Cluster.Shape.Workers = with(r.Cluster.Shape.Workers, name)
	if err := r.join(ctx, name, machines.RoleWorker, rel); err != nil {
		return err
	}
	return r.waitNodeReadyAt(ctx, name, rel.Kubernetes)
}

// join records the shape (the new machine and its release in it) and the
// machine's join token, enrolls the machine in the inventory with the
// token's public ID (so that the approver approves its node client
// certificate to that token only), creates it from its role's full config
// at release rel with that token, and waits for its Node to register;
// then the token is deleted, as it is when any of this fails.
func (r *Runner) join(ctx context.Context, name, role string, rel release.Release) error {
	err := func() error {
		full, err := r.startJoin(ctx, name, role, rel)
		if err != nil {
			return err
		}
		if err := r.enroll(ctx, name, r.joinTokenID(name)); err != nil {
			return err
		}
		r.Cluster.Full = map[string][]byte{role: full}
		err = r.Machines.ApplyMachines(ctx, r.Cluster)
		r.Cluster.Full = nil
		if err != nil {
			return err
		}
		return r.waitNodeRegistered(ctx, name)
	}()
	if err != nil {
		return r.joinFailed(ctx, name, err)
	}
	return r.endJoin(ctx, name)
}

// waitNodeRegistered waits for the Node name to exist, naming its
// machine's state when it is not running.
func (r *Runner) waitNodeRegistered(ctx context.Context, name string) error {
	return r.until(ctx, r.joinTimeout(), "Waiting for Node "+name+" to register", func(ctx context.Context) (bool, string, error) {
		_, err := r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, r.machineNote(ctx, name, "not registered yet"), nil
		}
		if err != nil {
			return false, "API: " + err.Error(), nil
		}
		return true, "", nil
	})
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

// waitNodeReadyAt waits for the Node name to be Ready with its kubelet at
// version ("" for any): right after a kubelet is replaced, its Node still
// shows the Ready condition the old kubelet reported.
func (r *Runner) waitNodeReadyAt(ctx context.Context, name, version string) error {
	what := "Waiting for Node " + name + " to be Ready"
	if version != "" {
		what += " with kubelet " + version
	}
	return r.until(ctx, r.joinTimeout(), what, func(ctx context.Context) (bool, string, error) {
		n, err := r.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, r.machineNote(ctx, name, "not registered yet"), nil
		}
		if err != nil {
			return false, "API: " + err.Error(), nil
		}
		if got := n.Status.NodeInfo.KubeletVersion; version != "" && got != version {
			return false, "its kubelet reports " + got, nil
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
