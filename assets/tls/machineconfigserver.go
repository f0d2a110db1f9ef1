package tls

import (
	"context"
	"crypto/x509/pkix"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*MachineConfigServer)(nil)

// MachineConfigServer is the serving certificate of the machine-config server
// (:22623), which serves Ignition to masters from the bootstrap machine and
// to workers from the masters. Pointer Ignition configs reach it at
// https://api-int.<name>.<baseDomain>:22623 and trust the root CA.
type MachineConfigServer struct{ CertKey }

// ID implements graph.Asset.
func (*MachineConfigServer) ID() string { return "tls/machine-config-server" }

// Name implements graph.Asset.
func (*MachineConfigServer) Name() string { return "machine-config-server serving certificate" }

// Dependencies implements graph.Asset.
func (*MachineConfigServer) Dependencies() []graph.Asset {
	return signedDeps(&RootCA{}, &installconfig.InstallConfig{})
}

// Generate issues the certificate for api-int, localhost where the nodes
// reach the server through their own proxy (types.Config.NodeProxy), and
// the API VIP when set.
func (c *MachineConfigServer) Generate(ctx context.Context, p graph.Parents) error {
	ic := &installconfig.InstallConfig{}
	if err := p.Get(ic); err != nil {
		return err
	}
	dns := []string{ic.Config.APIIntName()}
	if _, _, ok := configs.NodeProxy(ic.Config); ok {
		dns = append(dns, "localhost")
	}
	dns, ips := appendHost(dns, nil, configs.APIVIP(ic.Config))
	return c.signed(ctx, p, &RootCA{}, certSpec{
		Subject:  pkix.Name{CommonName: "machine-config-server"},
		DNSNames: dns,
		IPs:      ips,
		Usage:    usageServer,
	})
}

// Files implements graph.WritableAsset.
func (c *MachineConfigServer) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// RootCA signed it.
func (c *MachineConfigServer) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageServer)
}
