package tls

import (
	"context"
	"crypto/x509/pkix"
	"net"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*EtcdServer)(nil)

// EtcdServer is the serving certificate of the bootstrap machine's temporary
// single-member etcd on its loopback client URL (https://localhost:2379),
// where the bootstrap control plane reaches it. Member IPs are unknown when
// kiln compiles the configs, so every member's own serving and peer
// certificates are issued at runtime on the bootstrap machine with
// IssueEtcdMember; this one only lives as long as the bootstrap machine.
type EtcdServer struct{ CertKey }

// ID implements graph.Asset.
func (*EtcdServer) ID() string { return "tls/etcd-server" }

// Name implements graph.Asset.
func (*EtcdServer) Name() string { return "etcd bootstrap serving certificate" }

// Dependencies implements graph.Asset.
func (*EtcdServer) Dependencies() []graph.Asset { return signedDeps(&EtcdCA{}) }

// Generate issues the certificate for BootstrapValidity. It also allows
// client authentication, which etcd's gRPC gateway uses to reach its own
// server.
func (c *EtcdServer) Generate(ctx context.Context, p graph.Parents) error {
	return c.signed(ctx, p, &EtcdCA{}, certSpec{
		Subject:  pkix.Name{CommonName: "etcd-server"},
		DNSNames: []string{"localhost"},
		IPs:      loopbackIPs(),
		Usage:    usageServerClient,
		Validity: BootstrapValidity,
	})
}

// Files implements graph.WritableAsset.
func (c *EtcdServer) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// EtcdCA signed it.
func (c *EtcdServer) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageServerClient)
}

// loopbackIPs returns 127.0.0.1 and ::1.
func loopbackIPs() []net.IP {
	return []net.IP{net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}
}
