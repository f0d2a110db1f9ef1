package kubeconfig

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*KubeScheduler)(nil)

// KubeScheduler is kube-scheduler's kubeconfig (--kubeconfig,
// --authentication-kubeconfig, --authorization-kubeconfig) on the bootstrap
// machine and the masters: its client certificate, server
// https://localhost:6443.
type KubeScheduler struct{ Kubeconfig }

// ID implements graph.Asset.
func (*KubeScheduler) ID() string { return "kubeconfig/kube-scheduler" }

// Name implements graph.Asset.
func (*KubeScheduler) Name() string { return "kube-scheduler kubeconfig" }

// Dependencies implements graph.Asset.
func (*KubeScheduler) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}, &tls.KubeSchedulerClient{}}
}

// Generate builds the kubeconfig.
func (k *KubeScheduler) Generate(_ context.Context, p graph.Parents) error {
	ic, ca, cert := &installconfig.InstallConfig{}, &tls.RootCA{}, &tls.KubeSchedulerClient{}
	if err := p.Get(ic, ca, cert); err != nil {
		return err
	}
	return k.generate(entry{
		path:    installdir.SchedulerKubeconfig,
		cluster: ic.Config.Metadata.Name,
		server:  localServer(),
		ca:      ca.Cert,
		user:    "system:kube-scheduler",
		auth:    clientCert(&cert.CertKey),
	})
}

// Load reuses a kubeconfig the user put at auth/kubeconfig-kube-scheduler.
func (k *KubeScheduler) Load(f graph.FileFetcher) (bool, error) {
	return k.load(f, installdir.SchedulerKubeconfig)
}
