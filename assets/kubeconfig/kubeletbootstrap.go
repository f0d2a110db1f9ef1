package kubeconfig

import (
	"context"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*KubeletBootstrap)(nil)

// KubeletBootstrap is the kubeconfig kubelet starts with on every node
// (--bootstrap-kubeconfig): the bootstrap token, server
// https://api-int.<name>.<baseDomain>:6443 (or the node's own proxy on a
// platform that runs one, types.Config.NodeProxy), trusting the root CA.
// With it kubelet requests its client certificate through a CSR.
type KubeletBootstrap struct{ Kubeconfig }

// ID implements graph.Asset.
func (*KubeletBootstrap) ID() string { return "kubeconfig/kubelet-bootstrap" }

// Name implements graph.Asset.
func (*KubeletBootstrap) Name() string { return "kubelet bootstrap kubeconfig" }

// Dependencies implements graph.Asset.
func (*KubeletBootstrap) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}, &bootstraptoken.BootstrapToken{}}
}

// Generate builds the kubeconfig.
func (k *KubeletBootstrap) Generate(_ context.Context, p graph.Parents) error {
	ic, ca, tok := &installconfig.InstallConfig{}, &tls.RootCA{}, &bootstraptoken.BootstrapToken{}
	if err := p.Get(ic, ca, tok); err != nil {
		return err
	}
	return k.generate(entry{
		path:    installdir.KubeletBootstrapKubeconfig,
		cluster: ic.Config.Metadata.Name,
		server:  InternalServer(ic.Config),
		ca:      ca.Cert,
		user:    "kubelet-bootstrap",
		auth:    &clientcmdapi.AuthInfo{Token: tok.Token()},
	})
}

// Load reuses a kubeconfig the user put at auth/kubeconfig-kubelet-bootstrap.
func (k *KubeletBootstrap) Load(f graph.FileFetcher) (bool, error) {
	return k.load(f, installdir.KubeletBootstrapKubeconfig)
}
