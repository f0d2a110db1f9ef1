package ignitionconfigs

import (
	"context"
	"path"

	"github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/mcsauth"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var _ graph.Asset = (*BootstrapBase)(nil)

// BootstrapBase is bootstrap.ign without the manifests bootkube applies:
// the machine's own configuration, the temporary control plane as static
// pods with its keys and kubeconfigs, and the machine-config server with the
// full master and worker configs. It depends on no manifest, so the graph
// builds it while the manifests are generated; Bootstrap only adds the
// manifests.
type BootstrapBase struct {
	// Config holds private keys: never log it.
	Config types.Config `json:"config"`
}

// ID implements graph.Asset.
func (*BootstrapBase) ID() string { return "ignition/bootstrap-base" }

// Name implements graph.Asset.
func (*BootstrapBase) Name() string { return "bootstrap Ignition config without the manifests" }

// Dependencies implements graph.Asset.
func (*BootstrapBase) Dependencies() []graph.Asset {
	return []graph.Asset{
		&installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{},
		&kubeconfig.Localhost{}, &kubeconfig.KubeControllerManager{}, &kubeconfig.KubeScheduler{},
		&MasterConfig{}, &WorkerConfig{}, &manifests.BootstrapStaticPods{}, &manifests.MasterStaticPods{},
		&bootstraptoken.ConfigTokens{},
	}
}

// Generate implements graph.Asset.
func (b *BootstrapBase) Generate(_ context.Context, p graph.Parents) error {
	ic, v, bundle := &installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{}
	admin, kcm, sched := &kubeconfig.Localhost{}, &kubeconfig.KubeControllerManager{}, &kubeconfig.KubeScheduler{}
	master, worker := &MasterConfig{}, &WorkerConfig{}
	bootPods, masterPods, tokens := &manifests.BootstrapStaticPods{}, &manifests.MasterStaticPods{}, &bootstraptoken.ConfigTokens{}
	if err := p.Get(ic, v, bundle, admin, kcm, sched, master, worker, bootPods, masterPods, tokens); err != nil {
		return err
	}
	cfg, err := baseConfig(RoleBootstrap, ic, v)
	if err != nil {
		return err
	}
	if err := place(&cfg, bundle, append(controlPlanePKI(), bootstrapOnlyPKI()...)); err != nil {
		return err
	}
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/admin.kubeconfig", 0o600, admin.File.Data)
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/controller-manager.kubeconfig", 0o600, kcm.File.Data)
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/scheduler.kubeconfig", 0o600, sched.File.Data)
	addFileSet(&cfg, nodelayout.StaticPodDir, bootPods.Files(), 0o644)
	etcd := fileNamed(masterPods.Files(), "etcd.yaml")
	if etcd == nil {
		p := installdir.StaticPods + "/master/etcd.yaml"
		return &graph.InputError{Err: &manifests.MissingFileError{Path: p, Dir: path.Dir(p)}}
	}
	ignition.AddFile(&cfg, nodelayout.MasterEtcdManifest, 0o644, etcd.Data)
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/master.ign", 0o600, master.Config)
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/worker.ign", 0o600, worker.Config)
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/"+mcsauth.TokenFile, 0o600, tokens.File(RoleMaster, RoleWorker))
	b.Config = cfg
	return nil
}

// String keeps the keys in the config out of formatted output.
func (*BootstrapBase) String() string {
	return "bootstrap Ignition config without the manifests (keys redacted)"
}

// GoString keeps the keys out of %#v output.
func (b *BootstrapBase) GoString() string { return b.String() }
