package tls

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Extend issues the certificate old (PEM) again from now: the same key,
// subject, names and usages, signed by ca, for the lifetime old was issued
// for. It is what a master's automatic renewal does (cmd/node/certrenew),
// as kubeadm's `certs renew` keeps a certificate's configuration: it needs
// no install-config, only the certificate and its CA. old must be a leaf
// that ca signed; a certificate never outlives its CA.
func Extend(ca *CertKey, old []byte, now time.Time) ([]byte, error) {
	cert, err := parseCert(old)
	if err != nil {
		return nil, err
	}
	if cert.IsCA {
		return nil, fmt.Errorf("%q is a CA: kiln extends leaf certificates only", cert.Subject.CommonName)
	}
	parent, err := ca.Certificate()
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	signer, err := ca.PrivateKey()
	if err != nil {
		return nil, fmt.Errorf("parse CA key: %w", err)
	}
	if err := cert.CheckSignatureFrom(parent); err != nil {
		return nil, fmt.Errorf("%q was not signed by %q: %w", cert.Subject.CommonName, parent.Subject.CommonName, err)
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore) - clockSkew
	if lifetime <= 0 {
		return nil, fmt.Errorf("%q has no lifetime to renew for (%s to %s)", cert.Subject.CommonName, cert.NotBefore, cert.NotAfter)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), serialBits))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               cert.Subject,
		DNSNames:              cert.DNSNames,
		IPAddresses:           cert.IPAddresses,
		URIs:                  cert.URIs,
		EmailAddresses:        cert.EmailAddresses,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              cert.KeyUsage,
		ExtKeyUsage:           cert.ExtKeyUsage,
		BasicConstraintsValid: true,
	}
	if tmpl.NotAfter.After(parent.NotAfter) {
		tmpl.NotAfter = parent.NotAfter
	}
	if !tmpl.NotAfter.After(now) {
		return nil, errors.New("the CA " + parent.Subject.CommonName + " has expired: rotate it")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, cert.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", cert.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), nil
}
