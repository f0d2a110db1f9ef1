package kubeconfig

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*Localhost)(nil)

// Localhost is a cluster-admin kubeconfig for https://localhost:6443, for
// bootkube and kubectl on the bootstrap machine and the masters, which
// reach the API without DNS or a load balancer.
type Localhost struct{ Kubeconfig }

// ID implements graph.Asset.
func (*Localhost) ID() string { return "kubeconfig/localhost" }

// Name implements graph.Asset.
func (*Localhost) Name() string { return "localhost admin kubeconfig" }

// Dependencies implements graph.Asset.
func (*Localhost) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}, &tls.AdminClient{}}
}

// Generate builds the kubeconfig.
func (k *Localhost) Generate(_ context.Context, p graph.Parents) error {
	ic, ca, cert := &installconfig.InstallConfig{}, &tls.RootCA{}, &tls.AdminClient{}
	if err := p.Get(ic, ca, cert); err != nil {
		return err
	}
	return k.generate(entry{
		path:    installdir.LocalhostKubeconfig,
		cluster: ic.Config.Metadata.Name,
		server:  localServer(),
		ca:      ca.Cert,
		user:    "admin",
		auth:    clientCert(&cert.CertKey),
	})
}

// Load reuses a kubeconfig the user put at auth/kubeconfig-localhost.
func (k *Localhost) Load(f graph.FileFetcher) (bool, error) {
	return k.load(f, installdir.LocalhostKubeconfig)
}
