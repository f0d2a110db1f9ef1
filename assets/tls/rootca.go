package tls

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*RootCA)(nil)

// RootCA is the cluster's Kubernetes CA. It signs the kube-apiserver and
// machine-config-server serving certificates and the control plane's client
// certificates; kube-apiserver trusts it for client certificates and
// kube-controller-manager signs kubelet client certificates with it (kubelet
// serving certificates have KubeletServingCA). Kubeconfigs, service account
// ca.crt and Ignition pointer configs trust it for the API and the
// machine-config server.
type RootCA struct{ CertKey }

// rootCACN is the common name of the RootCA's certificate.
const rootCACN = "kiln-root-ca"

// ID implements graph.Asset.
func (*RootCA) ID() string { return "tls/root-ca" }

// Name implements graph.Asset.
func (*RootCA) Name() string { return "root CA" }

// Dependencies implements graph.Asset.
func (*RootCA) Dependencies() []graph.Asset { return []graph.Asset{&KeyAlgorithm{}} }

// Generate creates a self-signed CA valid for CAValidity.
func (c *RootCA) Generate(ctx context.Context, p graph.Parents) error {
	return c.selfSigned(ctx, p, caSpec(rootCACN))
}

// Files implements graph.WritableAsset.
func (c *RootCA) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a CA the user put in --dir.
func (c *RootCA) Load(f graph.FileFetcher) (bool, error) { return c.load(f, c.ID(), usageCA) }
