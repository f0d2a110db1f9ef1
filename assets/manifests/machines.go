package manifests

import (
	"context"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/manifests/inventory"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*Machines)(nil)

// machinesPath is the file of Machines.
const machinesPath = ManifestsDir + "/05-machines.yaml"

// Machines is manifests/05-machines.yaml: the machine inventory (ConfigMap
// kube-system/kiln-machines) of the masters and workers the install-config
// creates, with the addresses their platform assigns them. It is empty on
// a platform that assigns none (none: the administrator adds the machines).
// kiln-csr-approver approves kubelet serving certificates for these names
// and addresses only.
type Machines struct{ fileSet }

// ID implements graph.Asset.
func (*Machines) ID() string { return "manifests/machines" }

// Name implements graph.Asset.
func (*Machines) Name() string { return "machine inventory manifest" }

// Dependencies implements graph.Asset.
func (*Machines) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &clusterid.ClusterID{}}
}

// Generate implements graph.Asset.
func (m *Machines) Generate(_ context.Context, p graph.Parents) error {
	ic, cid := &installconfig.InstallConfig{}, &clusterid.ClusterID{}
	if err := p.Get(ic, cid); err != nil {
		return err
	}
	inv, err := inventoryOf(ic, cid.InfraID)
	if err != nil {
		return err
	}
	cm, err := inv.ConfigMap()
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(cm)
	if err != nil {
		return err
	}
	m.FileList = []*graph.File{{Path: machinesPath, Data: data}}
	return nil
}

// Load implements graph.WritableAsset.
func (m *Machines) Load(f graph.FileFetcher) (bool, error) {
	return m.load(f, []string{machinesPath}, CheckObjects)
}

// inventoryOf returns the machine inventory of a cluster as ic creates it:
// its masters then its workers, with the addresses the platform assigns;
// empty when the platform assigns none.
func inventoryOf(ic *installconfig.InstallConfig, infraID string) (*inventory.Inventory, error) {
	res, err := ic.Resolved()
	if err != nil {
		return nil, err
	}
	inv := &inventory.Inventory{}
	masters, workers := installconfig.MachineNames(ic.Config, infraID)
	for _, set := range []struct {
		role  string
		names []string
	}{{inventory.RoleMaster, masters}, {inventory.RoleWorker, workers}} {
		for _, n := range set.names {
			addrs, ok, err := installconfig.MachineAddresses(ic.Config, res, infraID, n)
			if err != nil {
				return nil, fmt.Errorf("address of machine %s: %w", n, err)
			}
			if !ok {
				return &inventory.Inventory{}, nil
			}
			inv.Set(inventory.Machine{Name: n, Role: set.role, Addresses: addrs})
		}
	}
	return inv, nil
}
