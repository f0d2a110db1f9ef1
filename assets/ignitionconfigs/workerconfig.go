package ignitionconfigs

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var _ graph.Asset = (*WorkerConfig)(nil)

// WorkerConfig is the full Ignition config of a worker, which the
// machine-config server serves at /config/worker (on the bootstrap machine,
// then on every master). It is not written to --dir.
type WorkerConfig struct {
	// Config is the marshalled, validated config.
	Config []byte `json:"config"`
}

// ID implements graph.Asset.
func (*WorkerConfig) ID() string { return "ignition/worker-config" }

// Name implements graph.Asset.
func (*WorkerConfig) Name() string { return "worker machine config" }

// Dependencies implements graph.Asset.
func (*WorkerConfig) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{}, &kubeconfig.KubeletBootstrap{}}
}

// Generate implements graph.Asset.
func (w *WorkerConfig) Generate(_ context.Context, p graph.Parents) error {
	ic, v, bundle, kc := &installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{}, &kubeconfig.KubeletBootstrap{}
	if err := p.Get(ic, v, bundle, kc); err != nil {
		return err
	}
	cfg, err := baseConfig(RoleWorker, ic, v)
	if err != nil {
		return err
	}
	if err := place(&cfg, bundle, workerPKI()); err != nil {
		return err
	}
	ignition.AddFile(&cfg, nodelayout.BootstrapKubeconfig, 0o600, kc.File.Data)
	w.Config, err = ignition.Marshal(cfg)
	return err
}

// String keeps the credentials in the config out of formatted output.
func (w *WorkerConfig) String() string { return "worker machine config" }
