package tls

import (
	"context"
	"crypto/x509"
	"sort"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.Asset = (*Bundle)(nil)

// Bundle is every TLS asset together, checked as a set: each certificate
// chains to the CA that must have signed it for its purpose. Assets that
// place TLS files on machines (Ignition) depend on Bundle, so that a
// user-provided certificate signed by the wrong CA stops the run with an
// input error naming the file.
type Bundle struct {
	// Files are the files of every asset in Assets(), sorted by path.
	Files []*graph.File `json:"files"`
}

// ID implements graph.Asset.
func (*Bundle) ID() string { return "tls/bundle" }

// Name implements graph.Asset.
func (*Bundle) Name() string { return "TLS bundle" }

// Dependencies implements graph.Asset.
func (*Bundle) Dependencies() []graph.Asset {
	all := Assets()
	deps := make([]graph.Asset, len(all))
	for i, a := range all {
		deps[i] = a
	}
	return deps
}

// issued is a certificate asset and the CA that signs it.
type issued struct {
	cert, ca caAsset
	usage    usage
}

// issuedCerts lists every signed certificate asset with its CA.
func issuedCerts() []issued {
	return []issued{
		{&APIServer{}, &RootCA{}, usageServer},
		{&APIServerKubeletClient{}, &RootCA{}, usageClient},
		{&APIServerEtcdClient{}, &EtcdCA{}, usageClient},
		{&EtcdServer{}, &EtcdCA{}, usageServerClient},
		{&FrontProxyClient{}, &FrontProxyCA{}, usageClient},
		{&AdminClient{}, &RootCA{}, usageClient},
		{&KubeControllerManagerClient{}, &RootCA{}, usageClient},
		{&KubeSchedulerClient{}, &RootCA{}, usageClient},
		{&MachineConfigServer{}, &RootCA{}, usageServer},
	}
}

// Generate checks every chain and collects the files.
func (b *Bundle) Generate(_ context.Context, p graph.Parents) error {
	deps := b.Dependencies()
	if err := p.Get(deps...); err != nil {
		return err
	}
	byID := make(map[string]graph.Asset, len(deps))
	for _, d := range deps {
		byID[d.ID()] = d
	}
	for _, is := range issuedCerts() {
		cert := byID[is.cert.ID()].(caAsset).certKey()
		ca := byID[is.ca.ID()].(caAsset).certKey()
		if err := verifyIssued(cert, is.cert.ID()+certSuffix, ca, is.ca.ID()+certSuffix, is.usage); err != nil {
			return err
		}
	}
	b.Files = nil
	for _, d := range deps {
		b.Files = append(b.Files, d.(graph.WritableAsset).Files()...)
	}
	sort.Slice(b.Files, func(i, j int) bool { return b.Files[i].Path < b.Files[j].Path })
	return nil
}

// verifyIssued checks that the certificate at certPath chains to the CA at
// caPath for the extended key usages of u.
func verifyIssued(ck *CertKey, certPath string, ca *CertKey, caPath string, u usage) error {
	cert, err := ck.Certificate()
	if err != nil {
		return inputError(certPath, "not a PEM certificate: %w", err)
	}
	caCert, err := ca.Certificate()
	if err != nil {
		return inputError(caPath, "not a PEM certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: u.extKeyUsages()}); err != nil {
		return inputError(certPath, "not signed by the CA %s (replace one of them, or remove %s so that kiln issues it): %w",
			caPath, certPath, err)
	}
	return nil
}

// File returns the file of the bundle at path, or nil.
func (b *Bundle) File(path string) *graph.File {
	i := sort.Search(len(b.Files), func(i int) bool { return b.Files[i].Path >= path })
	if i < len(b.Files) && b.Files[i].Path == path {
		return b.Files[i]
	}
	return nil
}
