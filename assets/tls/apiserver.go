package tls

import (
	"context"
	"crypto/x509/pkix"
	"net"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*APIServer)(nil)

// APIServer is kube-apiserver's serving certificate (--tls-cert-file), on the
// bootstrap machine and on every master, signed by the root CA.
type APIServer struct{ CertKey }

// ID implements graph.Asset.
func (*APIServer) ID() string { return "tls/apiserver" }

// Name implements graph.Asset.
func (*APIServer) Name() string { return "kube-apiserver serving certificate" }

// Dependencies implements graph.Asset.
func (*APIServer) Dependencies() []graph.Asset {
	return signedDeps(&RootCA{}, &installconfig.InstallConfig{})
}

// Generate issues the certificate for every name clients use; see
// apiServerSANs.
func (c *APIServer) Generate(ctx context.Context, p graph.Parents) error {
	ic := &installconfig.InstallConfig{}
	if err := p.Get(ic); err != nil {
		return err
	}
	res, err := ic.Resolved()
	if err != nil {
		return err
	}
	dns, ips := apiServerSANs(ic.Config, res)
	return c.signed(ctx, p, &RootCA{}, certSpec{
		Subject:  pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: dns,
		IPs:      ips,
		Usage:    usageServer,
	})
}

// Files implements graph.WritableAsset.
func (c *APIServer) Files() []*graph.File { return c.files(c.ID()) }

// Load reuses a certificate the user put in --dir; Bundle checks that the
// RootCA signed it.
func (c *APIServer) Load(f graph.FileFetcher) (bool, error) {
	return c.load(f, c.ID(), usageServer)
}

// ServiceDNSDomain is the cluster's DNS domain for Services (kubelet
// --cluster-domain); install-config's ClusterDomain is <name>.<baseDomain>,
// which is a different thing. The manifests use the same value, so the
// service account issuer and JWKS URL are names this certificate covers.
const ServiceDNSDomain = "cluster.local"

// apiServerSANs returns the names and addresses of kube-apiserver: the
// in-cluster Service names, the first Service IP, api and api-int, the API
// VIP when the platform has one, and localhost for components on masters.
func apiServerSANs(cfg *types.Config, res types.Resolved) (dns []string, ips []net.IP) {
	dns = []string{
		"kubernetes",
		"kubernetes.default",
		"kubernetes.default.svc",
		"kubernetes.default.svc.cluster",
		"kubernetes.default.svc." + ServiceDNSDomain,
		cfg.APIName(),
		cfg.APIIntName(),
		"localhost",
	}
	if ip := res.FirstServiceIP(); ip.IsValid() {
		ips = append(ips, net.IP(ip.AsSlice()))
	}
	dns, ips = appendHost(dns, ips, configs.APIVIP(cfg))
	return dns, append(ips, loopbackIPs()...)
}

// appendHost adds host to ips when it is an IP address, else to dns; an
// empty host adds nothing.
func appendHost(dns []string, ips []net.IP, host string) ([]string, []net.IP) {
	switch ip := net.ParseIP(host); {
	case host == "":
	case ip != nil:
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		ips = append(ips, ip)
	default:
		dns = append(dns, host)
	}
	return dns, ips
}
