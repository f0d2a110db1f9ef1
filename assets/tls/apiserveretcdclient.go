package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*APIServerEtcdClient)(nil)

// APIServerEtcdClient is kube-apiserver's client certificate towards etcd
// (--etcd-certfile); etcd trusts every client certificate its CA signed.
type APIServerEtcdClient struct{ CertKey }

// ID implements graph.Asset.
func (*APIServerEtcdClient) ID() string { return "tls/apiserver-etcd-client" }

// Name implements graph.Asset.
func (*APIServerEtcdClient) Name() string { return "kube-apiserver etcd client certificate" }

// Dependencies implements graph.Asset.
func (*APIServerEtcdClient) Dependencies() []graph.Asset { return signedDeps(&EtcdCA{}) }

// Generate issues the client certificate, signed by the EtcdCA.
func (c *APIServerEtcdClient) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &EtcdCA{}, certSpec{
		Subject: pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		Usage:   usageClient,
	})
}

// Files implements graph.WritableAsset.
func (c *APIServerEtcdClient) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// EtcdCA signed it.
func (c *APIServerEtcdClient) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageClient)
}
