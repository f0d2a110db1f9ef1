package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*APIServerKubeletClient)(nil)

// APIServerKubeletClient is kube-apiserver's client certificate towards kubelets
// (--kubelet-client-certificate): user kube-apiserver-kubelet-client, group
// KubeletAPIGroup. It is deliberately not in system:masters; the manifests
// bind the group to the system:kubelet-api-admin ClusterRole.
type APIServerKubeletClient struct{ CertKey }

// ID implements graph.Asset.
func (*APIServerKubeletClient) ID() string { return "tls/apiserver-kubelet-client" }

// Name implements graph.Asset.
func (*APIServerKubeletClient) Name() string { return "kube-apiserver kubelet client certificate" }

// Dependencies implements graph.Asset.
func (*APIServerKubeletClient) Dependencies() []graph.Asset { return signedDeps(&RootCA{}) }

// Generate issues the client certificate, signed by the RootCA.
func (c *APIServerKubeletClient) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &RootCA{}, certSpec{
		Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{KubeletAPIGroup}},
		Usage:   usageClient,
	})
}

// Files implements graph.WritableAsset.
func (c *APIServerKubeletClient) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// RootCA signed it.
func (c *APIServerKubeletClient) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageClient)
}

// KubeletAPIGroup is the group (O) of APIServerKubeletClient; the manifests
// bind it to the system:kubelet-api-admin ClusterRole.
const KubeletAPIGroup = "kiln:kube-apiserver-kubelet-clients"
