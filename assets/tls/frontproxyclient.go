package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*FrontProxyClient)(nil)

// FrontProxyClient is kube-apiserver's client certificate towards aggregated
// API servers (--proxy-client-cert-file); its CN is the value of
// --requestheader-allowed-names.
type FrontProxyClient struct{ CertKey }

// ID implements graph.Asset.
func (*FrontProxyClient) ID() string { return "tls/front-proxy-client" }

// Name implements graph.Asset.
func (*FrontProxyClient) Name() string { return "front-proxy client certificate" }

// Dependencies implements graph.Asset.
func (*FrontProxyClient) Dependencies() []graph.Asset { return signedDeps(&FrontProxyCA{}) }

// Generate issues the client certificate, signed by the FrontProxyCA.
func (c *FrontProxyClient) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &FrontProxyCA{}, certSpec{
		Subject: pkix.Name{CommonName: "front-proxy-client"},
		Usage:   usageClient,
	})
}

// Files implements graph.WritableAsset.
func (c *FrontProxyClient) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// FrontProxyCA signed it.
func (c *FrontProxyClient) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageClient)
}
