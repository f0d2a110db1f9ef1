package tls

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*EtcdCA)(nil)

// EtcdCA signs etcd's serving and peer certificates and the kube-apiserver's
// etcd client certificate. Its key goes to the bootstrap machine only, which
// issues each member's certificates at runtime (see IssueEtcdMember).
type EtcdCA struct{ CertKey }

// etcdCACN is the common name of the EtcdCA's certificate.
const etcdCACN = "kiln-etcd-ca"

// ID implements graph.Asset.
func (*EtcdCA) ID() string { return "tls/etcd-ca" }

// Name implements graph.Asset.
func (*EtcdCA) Name() string { return "etcd CA" }

// Dependencies implements graph.Asset.
func (*EtcdCA) Dependencies() []graph.Asset { return []graph.Asset{&KeyAlgorithm{}} }

// Generate creates a self-signed CA valid for CAValidity.
func (c *EtcdCA) Generate(ctx context.Context, p graph.Parents) error {
	return c.selfSigned(ctx, p, caSpec(etcdCACN))
}

// Files implements graph.WritableAsset.
func (c *EtcdCA) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a CA the user put in --dir.
func (c *EtcdCA) Load(f graph.FileFetcher) (bool, error) { return c.load(f, c.ID(), usageCA) }
