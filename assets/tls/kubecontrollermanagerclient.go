package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeControllerManagerClient)(nil)

// KubeControllerManagerClient authenticates kube-controller-manager to kube-apiserver as
// the user system:kube-controller-manager, which Kubernetes' default RBAC
// binds to the system:kube-controller-manager ClusterRole.
type KubeControllerManagerClient struct{ CertKey }

// ID implements graph.Asset.
func (*KubeControllerManagerClient) ID() string { return "tls/kube-controller-manager-client" }

// Name implements graph.Asset.
func (*KubeControllerManagerClient) Name() string {
	return "kube-controller-manager client certificate"
}

// Dependencies implements graph.Asset.
func (*KubeControllerManagerClient) Dependencies() []graph.Asset { return signedDeps(&RootCA{}) }

// Generate issues the client certificate, signed by the RootCA.
func (c *KubeControllerManagerClient) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &RootCA{}, certSpec{
		Subject: pkix.Name{CommonName: "system:kube-controller-manager"},
		Usage:   usageClient,
	})
}

// Files implements graph.WritableAsset.
func (c *KubeControllerManagerClient) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// RootCA signed it.
func (c *KubeControllerManagerClient) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageClient)
}
