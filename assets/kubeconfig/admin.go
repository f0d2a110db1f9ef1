package kubeconfig

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*Admin)(nil)

// Admin is the user's cluster-admin kubeconfig, auth/kubeconfig: user
// system:admin (group system:masters) with the admin client certificate,
// server https://<API VIP>:6443 when the platform has a VIP, else
// https://api.<name>.<baseDomain>:6443.
type Admin struct{ Kubeconfig }

// ID implements graph.Asset.
func (*Admin) ID() string { return "kubeconfig/admin" }

// Name implements graph.Asset.
func (*Admin) Name() string { return "admin kubeconfig" }

// Dependencies implements graph.Asset.
func (*Admin) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &tls.RootCA{}, &tls.AdminClient{}}
}

// Generate builds the kubeconfig.
func (k *Admin) Generate(_ context.Context, p graph.Parents) error {
	ic, ca, cert := &installconfig.InstallConfig{}, &tls.RootCA{}, &tls.AdminClient{}
	if err := p.Get(ic, ca, cert); err != nil {
		return err
	}
	return k.generate(entry{
		path:    installdir.AdminKubeconfig,
		cluster: ic.Config.Metadata.Name,
		server:  externalServer(ic.Config),
		ca:      ca.Cert,
		user:    "admin",
		auth:    clientCert(&cert.CertKey),
	})
}

// Load reuses a kubeconfig the user put at auth/kubeconfig.
func (k *Admin) Load(f graph.FileFetcher) (bool, error) { return k.load(f, installdir.AdminKubeconfig) }
