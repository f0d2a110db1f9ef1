package kubeconfig

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*KubeControllerManager)(nil)

// KubeControllerManager is kube-controller-manager's kubeconfig
// (--kubeconfig, --authentication-kubeconfig, --authorization-kubeconfig) on
// the bootstrap machine and the masters: its client certificate, server
// https://localhost:6443.
type KubeControllerManager struct{ Kubeconfig }

// ID implements graph.Asset.
func (*KubeControllerManager) ID() string { return "kubeconfig/kube-controller-manager" }

// Name implements graph.Asset.
func (*KubeControllerManager) Name() string { return "kube-controller-manager kubeconfig" }

// Dependencies implements graph.Asset.
func (*KubeControllerManager) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}, &tls.KubeControllerManagerClient{}}
}

// Generate builds the kubeconfig.
func (k *KubeControllerManager) Generate(_ context.Context, p graph.Parents) error {
	ic, ca, cert := &installconfig.InstallConfig{}, &tls.RootCA{}, &tls.KubeControllerManagerClient{}
	if err := p.Get(ic, ca, cert); err != nil {
		return err
	}
	return k.generate(entry{
		path:    installdir.ControllerManagerKubeconfig,
		cluster: ic.Config.Metadata.Name,
		server:  localServer(),
		ca:      ca.Cert,
		user:    "system:kube-controller-manager",
		auth:    clientCert(&cert.CertKey),
	})
}

// Load reuses a kubeconfig the user put at auth/kubeconfig-kube-controller-manager.
func (k *KubeControllerManager) Load(f graph.FileFetcher) (bool, error) {
	return k.load(f, installdir.ControllerManagerKubeconfig)
}
