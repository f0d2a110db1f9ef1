package tls

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*FrontProxyCA)(nil)

// FrontProxyCA signs the kube-apiserver's aggregation-layer client certificate
// (FrontProxyClient); kube-apiserver trusts it as --requestheader-client-ca-file.
type FrontProxyCA struct{ CertKey }

// frontProxyCACN is the common name of the FrontProxyCA's certificate.
const frontProxyCACN = "kiln-front-proxy-ca"

// ID implements graph.Asset.
func (*FrontProxyCA) ID() string { return "tls/front-proxy-ca" }

// Name implements graph.Asset.
func (*FrontProxyCA) Name() string { return "front-proxy CA" }

// Dependencies implements graph.Asset.
func (*FrontProxyCA) Dependencies() []graph.Asset { return []graph.Asset{&KeyAlgorithm{}} }

// Generate creates a self-signed CA valid for CAValidity.
func (c *FrontProxyCA) Generate(ctx context.Context, p graph.Parents) error {
	return c.selfSigned(ctx, p, caSpec(frontProxyCACN))
}

// Files implements graph.WritableAsset.
func (c *FrontProxyCA) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a CA the user put in --dir.
func (c *FrontProxyCA) Load(f graph.FileFetcher) (bool, error) { return c.load(f, c.ID(), usageCA) }
