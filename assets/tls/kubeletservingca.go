package tls

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeletServingCA)(nil)

// KubeletServingCA signs kubelet serving certificates: kube-controller-manager
// signs the CSRs of signer kubernetes.io/kubelet-serving with it
// (--cluster-signing-kubelet-serving-cert-file/-key-file), so its key goes
// where kube-controller-manager runs (bootstrap machine, masters). Only the
// clients of kubelets trust it: kube-apiserver's
// --kubelet-certificate-authority and metrics-server. It is in no bundle that
// clients of the API server trust (kubeconfigs, service account ca.crt, the
// pointer configs), so a kubelet serving certificate, whatever names it
// carries, never passes for the API server's.
type KubeletServingCA struct{ CertKey }

// kubeletServingCACN is the common name of the KubeletServingCA's certificate.
const kubeletServingCACN = "kiln-kubelet-serving-ca"

// ID implements graph.Asset.
func (*KubeletServingCA) ID() string { return "tls/kubelet-serving-ca" }

// Name implements graph.Asset.
func (*KubeletServingCA) Name() string { return "kubelet serving CA" }

// Dependencies implements graph.Asset.
func (*KubeletServingCA) Dependencies() []graph.Asset { return []graph.Asset{&KeyAlgorithm{}} }

// Generate creates a self-signed CA valid for CAValidity.
func (c *KubeletServingCA) Generate(ctx context.Context, p graph.Parents) error {
	return c.selfSigned(ctx, p, caSpec(kubeletServingCACN))
}

// Files implements graph.WritableAsset.
func (c *KubeletServingCA) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a CA the user put in --dir.
func (c *KubeletServingCA) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageCA)
}
