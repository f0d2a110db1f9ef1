package tls

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// usage is what a certificate is for; it decides KeyUsage and ExtKeyUsage.
type usage int

const (
	// usageCA is a certificate authority.
	usageCA usage = iota
	// usageServer is a TLS serving certificate.
	usageServer
	// usageClient is a TLS client certificate.
	usageClient
	// usageServerClient serves and authenticates as a client (etcd peers).
	usageServerClient
)

// extKeyUsages returns the extended key usages of u.
func (u usage) extKeyUsages() []x509.ExtKeyUsage {
	switch u {
	case usageServer:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case usageClient:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	case usageServerClient:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	return nil
}

// keyUsage returns the key usages of u for a key of type pub.
func (u usage) keyUsage(pub crypto.PublicKey) x509.KeyUsage {
	if u == usageCA {
		return x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	}
	ku := x509.KeyUsageDigitalSignature
	if _, isRSA := pub.(*rsa.PublicKey); isRSA && u != usageClient {
		// TLS 1.2 RSA key exchange encrypts with the server's key.
		ku |= x509.KeyUsageKeyEncipherment
	}
	return ku
}

// clockSkew backdates NotBefore so that machines whose clock is slightly
// behind the installer's accept new certificates.
const clockSkew = 5 * time.Minute

// serialBits is the size of random certificate serial numbers.
const serialBits = 128

// certSpec describes a certificate to issue.
type certSpec struct {
	Subject  pkix.Name
	DNSNames []string
	IPs      []net.IP
	Usage    usage
	Validity time.Duration
}

// issue generates a key of type alg and a certificate for spec, signed by ca
// or self-signed when ca is nil. A certificate never outlives its CA.
func issue(ctx context.Context, alg Algorithm, ca *CertKey, spec certSpec) (CertKey, error) {
	if err := ctx.Err(); err != nil {
		return CertKey{}, err
	}
	key, err := alg.NewKey()
	if err != nil {
		return CertKey{}, fmt.Errorf("generate %s key: %w", alg, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), serialBits))
	if err != nil {
		return CertKey{}, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               spec.Subject,
		DNSNames:              spec.DNSNames,
		IPAddresses:           spec.IPs,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(spec.Validity),
		KeyUsage:              spec.Usage.keyUsage(key.Public()),
		ExtKeyUsage:           spec.Usage.extKeyUsages(),
		BasicConstraintsValid: true,
		IsCA:                  spec.Usage == usageCA,
	}
	parent, signer := tmpl, key
	if ca != nil {
		if parent, err = ca.Certificate(); err != nil {
			return CertKey{}, fmt.Errorf("parse CA certificate: %w", err)
		}
		if signer, err = ca.PrivateKey(); err != nil {
			return CertKey{}, fmt.Errorf("parse CA key: %w", err)
		}
		if tmpl.NotAfter.After(parent.NotAfter) {
			tmpl.NotAfter = parent.NotAfter
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return CertKey{}, fmt.Errorf("sign certificate %q: %w", spec.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return CertKey{}, fmt.Errorf("encode key: %w", err)
	}
	return CertKey{
		Cert: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		Key:  keyPEM,
	}, nil
}
