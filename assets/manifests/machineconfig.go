package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*MachineConfig)(nil)

const machineConfigTemplate = "cluster/17-machine-config.yaml"

// MachineConfig is manifests/17-machine-config.yaml: the MachineConfig and
// MachineConfigPool resources (kiln.dev/v1alpha1), the Deployment that
// runs `kiln node machine-config-controller` on the masters with its RBAC,
// and the RBAC that lets every node's agent read rendered configs
// (docs/machine-config.md).
type MachineConfig struct{ objects }

// ID implements graph.Asset.
func (*MachineConfig) ID() string { return "manifests/machine-config" }

// Name implements graph.Asset.
func (*MachineConfig) Name() string { return "machine-config API and controller manifest" }

// Dependencies implements graph.Asset.
func (*MachineConfig) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *MachineConfig) Generate(_ context.Context, p graph.Parents) error {
	return m.generate(p, machineConfigTemplate, nil)
}

// Load implements graph.WritableAsset.
func (m *MachineConfig) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, machineConfigTemplate)
}
