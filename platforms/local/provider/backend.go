package provider

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/platforms/local/machine"
)

// Machines is what the machine resource needs of the machine runtime;
// *machine.Manager implements it.
type Machines interface {
	// Create creates and boots a machine.
	Create(ctx context.Context, s machine.Spec) error
	// Destroy stops and removes a machine; an absent one is fine.
	Destroy(ctx context.Context, name string) error
	// State reports whether a machine runs, is stopped or is absent.
	State(ctx context.Context, name string) (machine.State, error)
	// Start boots a stopped machine again from its existing disk.
	Start(ctx context.Context, s machine.Spec) error
	// Stop shuts a machine down cleanly, keeping its disk.
	Stop(ctx context.Context, name string) error
}

// Networks is what the network resource needs of the host.
type Networks interface {
	// EnsureBridge creates the bridge with the host address gatewayCIDR.
	EnsureBridge(ctx context.Context, name, gatewayCIDR string) error
	// DeleteBridge deletes the bridge; an absent one is fine.
	DeleteBridge(ctx context.Context, name string) error
	// BridgeExists reports whether the bridge exists.
	BridgeExists(ctx context.Context, name string) (bool, error)
	// EnableEgress masquerades the bridge's network out of the host's
	// other interfaces (machine.Egress); it is idempotent.
	EnableEgress(ctx context.Context, bridge string, network netip.Prefix) error
	// DisableEgress undoes EnableEgress; nothing enabled is fine.
	DisableEgress(ctx context.Context, bridge string) error
	// EgressEnabled reports whether the bridge's NAT is in place (a host
	// reboot empties it).
	EgressEnabled(ctx context.Context, bridge string) (bool, error)
}

// Settings is the provider's configuration after defaults.
type Settings struct {
	// MachineDir is the machines' state root.
	MachineDir string
	// ImageDir is the default node image of machines.
	ImageDir string
	// LBDir holds one directory per load balancer (config, pid, log).
	LBDir string
}

// Backend is what the resources act on; Factory builds it once the
// provider is configured.
type Backend struct {
	// Machines creates and destroys machines.
	Machines Machines
	// Networks creates and deletes bridges.
	Networks Networks
	// Kiln is the binary that runs `kiln lb`.
	Kiln string
	// Settings is the provider configuration.
	Settings Settings
}

// Factory returns the Backend for the provider's settings.
type Factory func(Settings) (*Backend, error)

// HostFactory is the production Factory: machines are managed by
// machine.Manager, bridges with ip(8), and `kiln lb` is the running binary.
func HostFactory(log logrus.FieldLogger) Factory {
	return func(s Settings) (*Backend, error) {
		kiln, err := os.Executable()
		if err != nil {
			return nil, err
		}
		run := machine.ExecRunner{Log: log}
		return &Backend{
			Machines: machine.NewManager(machine.Options{StateRoot: s.MachineDir, Log: log, Runner: run}),
			Networks: hostNetworks{run: run, egress: machine.Egress{Run: run}},
			Kiln:     kiln,
			Settings: s,
		}, nil
	}
}

// hostNetworks manages bridges on the host with machine's bridge helpers.
type hostNetworks struct {
	run    machine.Runner
	egress machine.Egress
}

// EnableEgress implements Networks.
func (h hostNetworks) EnableEgress(ctx context.Context, bridge string, network netip.Prefix) error {
	return h.egress.Enable(ctx, bridge, network)
}

// DisableEgress implements Networks.
func (h hostNetworks) DisableEgress(ctx context.Context, bridge string) error {
	return h.egress.Disable(ctx, bridge)
}

// EgressEnabled implements Networks.
func (h hostNetworks) EgressEnabled(ctx context.Context, bridge string) (bool, error) {
	return h.egress.Enabled(ctx, bridge)
}

// EnsureBridge implements Networks.
func (h hostNetworks) EnsureBridge(ctx context.Context, name, gatewayCIDR string) error {
	return machine.EnsureBridge(ctx, h.run, name, gatewayCIDR)
}

// DeleteBridge implements Networks.
func (h hostNetworks) DeleteBridge(ctx context.Context, name string) error {
	return machine.DeleteBridge(ctx, h.run, name)
}

// BridgeExists implements Networks from /sys/class/net.
func (hostNetworks) BridgeExists(_ context.Context, name string) (bool, error) {
	_, err := os.Stat(filepath.Join("/sys/class/net", name, "bridge"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
