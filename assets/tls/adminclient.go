package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*AdminClient)(nil)

// AdminClient is the cluster-admin client certificate (CN=system:admin,
// O=system:masters) of auth/kubeconfig and the localhost kubeconfig.
type AdminClient struct{ CertKey }

// ID implements graph.Asset.
func (*AdminClient) ID() string { return "tls/admin-client" }

// Name implements graph.Asset.
func (*AdminClient) Name() string { return "admin client certificate" }

// Dependencies implements graph.Asset.
func (*AdminClient) Dependencies() []graph.Asset { return signedDeps(&RootCA{}) }

// Generate issues the client certificate, signed by the RootCA.
func (c *AdminClient) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &RootCA{}, certSpec{
		Subject: pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}},
		Usage:   usageClient,
	})
}

// Files implements graph.WritableAsset.
func (c *AdminClient) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// RootCA signed it.
func (c *AdminClient) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageClient)
}
