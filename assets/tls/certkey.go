package tls

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/kiln-project/kiln/graph"
)

// File name suffixes and modes of certificate assets in --dir.
const (
	certSuffix = ".crt"
	keySuffix  = ".key"
	certMode   = 0o644
	keyMode    = 0o600
)

// PEM block types kiln writes and reads.
const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY"
	pemPublicKey   = "PUBLIC KEY"
)

// CertKey is a PEM certificate and its PEM (PKCS#8) private key. It is the
// shared base of every certificate asset: the asset's ID names its files,
// ID+".crt" and ID+".key".
type CertKey struct {
	// Cert is the PEM certificate; a user-provided file may append its chain.
	Cert []byte `json:"cert"`
	// Key is the PEM private key. It is a secret: never log it.
	Key []byte `json:"key"`
}

// caAsset is a certificate authority asset that can sign others.
type caAsset interface {
	graph.Asset
	certKey() *CertKey
}

// CheckState implements graph.StateChecker for every asset that embeds
// CertKey: a pair restored from the state file must parse and its key must
// belong to its certificate. An empty pair (none made yet) passes.
func (c *CertKey) CheckState() error {
	if len(c.Cert) == 0 && len(c.Key) == 0 {
		return nil
	}
	cert, err := c.Certificate()
	if err != nil {
		return fmt.Errorf("the certificate does not parse: %w", err)
	}
	key, err := c.PrivateKey()
	if err != nil {
		return fmt.Errorf("the private key of %q does not parse: %w", cert.Subject.CommonName, err)
	}
	if !publicKeyMatches(cert.PublicKey, key) {
		return fmt.Errorf("the private key does not belong to the certificate %q (it was swapped for another)", cert.Subject.CommonName)
	}
	return nil
}

// InputKind implements graph.Sized for every asset that embeds CertKey.
func (*CertKey) InputKind() graph.Input { return graph.TLSInput }

// certKey returns c; promoted to every asset that embeds CertKey.
func (c *CertKey) certKey() *CertKey { return c }

// Certificate parses the first certificate of Cert.
func (c *CertKey) Certificate() (*x509.Certificate, error) {
	return parseCert(c.Cert)
}

// PrivateKey parses Key.
func (c *CertKey) PrivateKey() (crypto.Signer, error) {
	return parseKey(c.Key)
}

// String names the certificate and keeps the key out of formatted output.
func (c *CertKey) String() string {
	cert, err := c.Certificate()
	if err != nil {
		return "certificate (none; key redacted)"
	}
	return "certificate " + cert.Subject.String() + " (key redacted)"
}

// GoString keeps the key out of %#v output.
func (c *CertKey) GoString() string { return c.String() }

// files returns the certificate (0644) and key (0600) files of the asset id.
func (c *CertKey) files(id string) []*graph.File {
	if len(c.Cert) == 0 {
		return nil
	}
	return []*graph.File{
		{Path: id + certSuffix, Data: c.Cert, Mode: certMode},
		{Path: id + keySuffix, Data: c.Key, Mode: keyMode},
	}
}

// selfSigned generates a new key and a certificate authority signed by it.
func (c *CertKey) selfSigned(ctx context.Context, p graph.Parents, spec certSpec) error {
	alg := &KeyAlgorithm{}
	if err := p.Get(alg); err != nil {
		return err
	}
	ck, err := issue(ctx, alg.Algorithm, nil, spec)
	if err != nil {
		return err
	}
	*c = ck
	return nil
}

// signed generates a new key and a certificate signed by the asset ca,
// valid for spec.Validity or, when that is zero, the leaf lifetime of
// Lifetimes.
func (c *CertKey) signed(ctx context.Context, p graph.Parents, ca caAsset, spec certSpec) error {
	alg, life := &KeyAlgorithm{}, &Lifetimes{}
	if err := p.Get(alg, ca, life); err != nil {
		return err
	}
	if spec.Validity == 0 {
		spec.Validity = life.Leaf
	}
	ck, err := issue(ctx, alg.Algorithm, ca.certKey(), spec)
	if err != nil {
		return err
	}
	*c = ck
	return nil
}

// signedDeps are the dependencies of a certificate signed by ca, plus extra.
func signedDeps(ca caAsset, extra ...graph.Asset) []graph.Asset {
	return append([]graph.Asset{&KeyAlgorithm{}, ca, &Lifetimes{}}, extra...)
}

// parseCert decodes the first CERTIFICATE block of data.
func parseCert(data []byte) (*x509.Certificate, error) {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM CERTIFICATE block")
		}
		if b.Type == pemCertificate {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// parseKey decodes a PEM private key in PKCS#8, PKCS#1 (RSA) or SEC 1 (EC)
// form.
func parseKey(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM private key block")
	}
	var (
		key any
		err error
	)
	switch b.Type {
	case pemPrivateKey:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q, want a private key", b.Type)
	}
	if err != nil {
		// The parser's own message is an ASN.1 structure dump: say what
		// the block should have held instead.
		return nil, fmt.Errorf("the PEM %q block does not hold a valid key of that form", b.Type)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	return signer, nil
}

// encodeKey returns key as a PEM PKCS#8 block.
func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// encodePublicKey returns pub as a PEM PKIX block.
func encodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublicKey, Bytes: der}), nil
}
