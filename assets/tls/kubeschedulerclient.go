package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeSchedulerClient)(nil)

// KubeSchedulerClient authenticates kube-scheduler to kube-apiserver as the user
// system:kube-scheduler, which Kubernetes' default RBAC binds to the
// system:kube-scheduler ClusterRole.
type KubeSchedulerClient struct{ CertKey }

// ID implements graph.Asset.
func (*KubeSchedulerClient) ID() string { return "tls/kube-scheduler-client" }

// Name implements graph.Asset.
func (*KubeSchedulerClient) Name() string { return "kube-scheduler client certificate" }

// Dependencies implements graph.Asset.
func (*KubeSchedulerClient) Dependencies() []graph.Asset { return signedDeps(&RootCA{}) }

// Generate issues the client certificate, signed by the RootCA.
func (c *KubeSchedulerClient) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &RootCA{}, certSpec{
		Subject: pkix.Name{CommonName: "system:kube-scheduler"},
		Usage:   usageClient,
	})
}

// Files implements graph.WritableAsset.
func (c *KubeSchedulerClient) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// RootCA signed it.
func (c *KubeSchedulerClient) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageClient)
}
