package ignitionconfigs

import (
	"context"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/mcsauth"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var _ graph.Asset = (*MasterConfig)(nil)

// MasterConfig is the full Ignition config of a master, served by the
// bootstrap machine's machine-config server at /config/master. A master
// starts with its control plane's static pods staged: bootkube's installer
// activates them once the master's etcd member votes. Each master serves the
// worker config in turn, to workers presenting the worker token, until the
// tokens expire. It is not written to --dir.
type MasterConfig struct {
	// Config is the marshalled, validated config.
	Config []byte `json:"config"`
}

// ID implements graph.Asset.
func (*MasterConfig) ID() string { return "ignition/master-config" }

// Name implements graph.Asset.
func (*MasterConfig) Name() string { return "master machine config" }

// Dependencies implements graph.Asset.
func (*MasterConfig) Dependencies() []graph.Asset {
	return []graph.Asset{
		&installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{}, &manifests.MasterStaticPods{},
		&kubeconfig.KubeletBootstrap{}, &kubeconfig.KubeControllerManager{}, &kubeconfig.KubeScheduler{},
		&WorkerConfig{}, &bootstraptoken.ConfigTokens{},
	}
}

// Generate implements graph.Asset.
func (m *MasterConfig) Generate(_ context.Context, p graph.Parents) error {
	ic, v, bundle, pods := &installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{}, &manifests.MasterStaticPods{}
	kubelet, kcm, sched, worker := &kubeconfig.KubeletBootstrap{}, &kubeconfig.KubeControllerManager{}, &kubeconfig.KubeScheduler{}, &WorkerConfig{}
	tokens := &bootstraptoken.ConfigTokens{}
	if err := p.Get(ic, v, bundle, pods, kubelet, kcm, sched, worker, tokens); err != nil {
		return err
	}
	cfg, err := baseConfig(RoleMaster, ic, v)
	if err != nil {
		return err
	}
	pki := controlPlanePKI()
	res, err := ic.Resolved()
	if err != nil {
		return err
	}
	if res.AutomaticRenewal {
		pki = append(pki, renewalPKI()...)
	}
	if err := place(&cfg, bundle, pki); err != nil {
		return err
	}
	ignition.AddFile(&cfg, nodelayout.BootstrapKubeconfig, 0o600, kubelet.File.Data)
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/controller-manager.kubeconfig", 0o600, kcm.File.Data)
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/scheduler.kubeconfig", 0o600, sched.File.Data)
	for _, f := range pods.Files() {
		if baseName(f.Path) != "etcd.yaml" { // etcd is installed by bootkube once the member is added
			ignition.AddFile(&cfg, nodelayout.StagedPodDir+"/"+baseName(f.Path), 0o644, f.Data)
		}
	}
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/worker.ign", 0o600, worker.Config)
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/"+mcsauth.TokenFile, 0o600, tokens.File(RoleWorker))
	m.Config, err = ignition.Marshal(cfg)
	return err
}

// String keeps the credentials in the config out of formatted output.
func (m *MasterConfig) String() string { return "master machine config" }
