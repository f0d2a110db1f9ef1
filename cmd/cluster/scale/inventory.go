package scale

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/manifests/inventory"
)

// The machine inventory (ConfigMap kube-system/kiln-machines) lists the
// names and addresses kiln-csr-approver approves kubelet serving
// certificates for, and the join token with which a machine added here may
// get its node client certificate. A machine goes into it before its
// machine is created, so its kubelet's first CSRs are approved, and leaves
// it only after
// the machine is destroyed, so no kubelet is ever left serving under a name
// the inventory no longer vouches for. Both steps are idempotent.

// enroll adds the master or worker name, with the addresses its platform
// assigns it and the public ID of the bootstrap token it joins with
// (joinTokenID, never the secret), to the machine inventory: the approver
// then approves a node client certificate for name to that token only. A
// cluster installed before kiln kept an inventory gets one with every
// machine of its shape. On a platform that assigns no addresses it changes
// nothing and says so.
func (r *Runner) enroll(ctx context.Context, name, joinTokenID string) error {
	m, ok, err := r.inventoryMachine(name)
	if err != nil {
		return err
	}
	if !ok {
		r.Log.Warnf("platform %s assigns no machine addresses: add %s to ConfigMap %s/%s yourself, or its node client and kubelet serving CSRs stay pending",
			r.Cluster.Config.PlatformName(), name, inventory.Namespace, inventory.Name)
		return nil
	}
	m.JoinTokenID = joinTokenID
	return r.step("Adding "+name+" to the machine inventory", func() error {
		return r.updateInventory(ctx, true, func(inv *inventory.Inventory) bool { return inv.Set(m) })
	})
}

// unenroll removes the machine name from the machine inventory.
func (r *Runner) unenroll(ctx context.Context, name string) error {
	return r.step("Removing "+name+" from the machine inventory", func() error {
		return r.updateInventory(ctx, false, func(inv *inventory.Inventory) bool { return inv.Remove(name) })
	})
}

// inventoryMachine is the inventory entry of the master or worker name; ok
// is false when the platform assigns no addresses.
func (r *Runner) inventoryMachine(name string) (m inventory.Machine, ok bool, err error) {
	shape := r.Cluster.Machines()
	var role string
	switch {
	case slices.Contains(shape.Masters, name):
		role = machines.RoleMaster
	case slices.Contains(shape.Workers, name):
		role = machines.RoleWorker
	default:
		return m, false, fmt.Errorf("machine name %q is not a master or worker of %s", name, r.Cluster.InfraID)
	}
	addrs, ok, err := installconfig.MachineAddresses(r.Cluster.Config, r.Cluster.Resolved, r.Cluster.InfraID, name)
	if err != nil || !ok {
		return m, false, err
	}
	return inventory.Machine{Name: name, Role: role, Addresses: addrs}, true, nil
}

// updateInventory applies change to the inventory in the cluster and
// writes it back when it changed, retrying on a conflicting write. A
// missing ConfigMap is created from the cluster's shape when create is
// set (change then applies to it too), and left missing otherwise. An
// inventory that does not parse is not overwritten: it is an error.
func (r *Runner) updateInventory(ctx context.Context, create bool, change func(*inventory.Inventory) bool) error {
	cms := r.Kube.CoreV1().ConfigMaps(inventory.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cms.Get(ctx, inventory.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !create {
				return nil
			}
			inv, err := r.shapeInventory()
			if err != nil {
				return err
			}
			change(inv)
			cm, err := inv.ConfigMap()
			if err != nil {
				return err
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return fmt.Errorf("read the machine inventory: %w", err)
		}
		inv, err := inventory.FromConfigMap(cur)
		if err != nil {
			return fmt.Errorf("%w (fix it with kubectl -n %s edit configmap %s)", err, inventory.Namespace, inventory.Name)
		}
		if !change(inv) {
			return nil
		}
		next, err := inv.ConfigMap()
		if err != nil {
			return err
		}
		cur = cur.DeepCopy()
		cur.Data[inventory.Key] = next.Data[inventory.Key]
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// shapeInventory is the inventory of every machine of the cluster's shape.
func (r *Runner) shapeInventory() (*inventory.Inventory, error) {
	inv := &inventory.Inventory{}
	for _, n := range r.Cluster.Machines().All() {
		m, ok, err := r.inventoryMachine(n)
		if err != nil {
			return nil, err
		}
		if ok {
			inv.Set(m)
		}
	}
	return inv, nil
}
