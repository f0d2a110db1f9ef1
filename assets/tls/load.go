package tls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/kiln-project/kiln/graph"
)

// FileError is a problem with a user-provided file in --dir. Load returns it
// wrapped in a *graph.InputError.
type FileError struct {
	// Path is the file, relative to --dir.
	Path string
	// Err is what is wrong with it.
	Err error
}

// Error names the file and the problem.
func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *FileError) Unwrap() error { return e.Err }

// inputError returns a FileError for path as a graph.InputError.
func inputError(path string, format string, args ...any) error {
	return &graph.InputError{Err: &FileError{Path: path, Err: fmt.Errorf(format, args...)}}
}

// load reads the pair id.crt/id.key from --dir and checks what can be
// checked without its CA: both files parse, the key matches the certificate,
// it is valid now, and it is a CA (u == usageCA) or has the extended key
// usages of u. Bundle checks that it is signed by its CA. found is false when
// neither file exists.
func (c *CertKey) load(f graph.FileFetcher, id string, u usage) (found bool, err error) {
	ck, found, err := fetchPair(f, id+certSuffix, id+keySuffix)
	if !found || err != nil {
		return found, err
	}
	certPath, keyPath := id+certSuffix, id+keySuffix
	cert, err := ck.Certificate()
	if err != nil {
		return true, inputError(certPath, "not a PEM certificate: %w", err)
	}
	key, err := ck.PrivateKey()
	if err != nil {
		return true, inputError(keyPath, "not a PEM private key: %w", err)
	}
	if err := strongEnough(key.Public()); err != nil {
		return true, inputError(keyPath, "%w", err)
	}
	if !publicKeyMatches(cert.PublicKey, key) {
		return true, inputError(keyPath, "private key does not match the certificate %s", certPath)
	}
	if weakSignature(cert.SignatureAlgorithm) {
		return true, inputError(certPath, "signed with %s, which is broken: sign it with SHA-256 or better", cert.SignatureAlgorithm)
	}
	now := time.Now()
	if now.After(cert.NotAfter) {
		return true, inputError(certPath, "certificate expired on %s: replace it, or remove it and %s so that kiln issues a new one",
			cert.NotAfter.UTC().Format(time.RFC3339), keyPath)
	}
	if now.Before(cert.NotBefore) {
		return true, inputError(certPath, "certificate is not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	}
	if u == usageCA && (!cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0) {
		return true, inputError(certPath, "not a certificate authority (needs basicConstraints CA:TRUE and keyUsage keyCertSign)")
	}
	if left := cert.NotAfter.Sub(now); u == usageCA && left < LeafValidity {
		// Refused rather than warned about: every certificate kiln issued
		// with it would silently expire with it.
		return true, inputError(certPath, "CA expires on %s (in %s), before the certificates kiln issues with it (valid %s) would: "+
			"they would all expire with it. Renew the CA (or use one valid for at least %s more), or remove %s and %s so that kiln creates one",
			cert.NotAfter.UTC().Format(time.RFC3339), humanDuration(left), humanDuration(LeafValidity), humanDuration(LeafValidity), certPath, keyPath)
	}
	for _, want := range u.extKeyUsages() {
		if len(cert.ExtKeyUsage) > 0 && !slices.Contains(cert.ExtKeyUsage, want) && !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny) {
			return true, inputError(certPath, "extended key usage lacks %s", extKeyUsageName(want))
		}
	}
	*c = ck
	return true, nil
}

// extKeyUsageName returns the OpenSSL name of an extended key usage kiln sets.
func extKeyUsageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "serverAuth"
	}
	return "clientAuth"
}

// fetchPair reads a certificate and its key. found is false when neither
// exists; one without the other is an input error.
func fetchPair(f graph.FileFetcher, certPath, keyPath string) (ck CertKey, found bool, err error) {
	certFile, certErr := f.FetchByName(certPath)
	keyFile, keyErr := f.FetchByName(keyPath)
	certMissing, keyMissing := errors.Is(certErr, fs.ErrNotExist), errors.Is(keyErr, fs.ErrNotExist)
	switch {
	case certMissing && keyMissing:
		return CertKey{}, false, nil
	case certErr != nil && !certMissing:
		return CertKey{}, true, inputError(certPath, "%w", certErr)
	case keyErr != nil && !keyMissing:
		return CertKey{}, true, inputError(keyPath, "%w", keyErr)
	case certMissing:
		return CertKey{}, true, inputError(certPath, "missing, but its key %s is present: provide both or neither", keyPath)
	case keyMissing:
		return CertKey{}, true, inputError(keyPath, "missing, but its certificate %s is present: provide both or neither", certPath)
	}
	return CertKey{Cert: certFile.Data, Key: keyFile.Data}, true, nil
}

// publicKeyMatches reports whether key is the private half of pub.
func publicKeyMatches(pub crypto.PublicKey, key crypto.Signer) bool {
	eq, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(pub)
}

// minRSABits is the smallest RSA key kiln accepts from the user.
const minRSABits = 2048

// strongEnough refuses keys too weak for a cluster's PKI: RSA under
// minRSABits, ECDSA under P-256.
func strongEnough(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits {
			return fmt.Errorf("RSA key of %d bits is too weak: use at least %d bits (or ECDSA P-256)", bits, minRSABits)
		}
	case *ecdsa.PublicKey:
		if bits := k.Curve.Params().BitSize; bits < 256 {
			return fmt.Errorf("ECDSA key on %s is too weak: use P-256 or larger", k.Curve.Params().Name)
		}
	}
	return nil
}

// weakSignature tells whether a certificate signature uses a broken hash.
func weakSignature(alg x509.SignatureAlgorithm) bool {
	switch alg {
	case x509.MD2WithRSA, x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1:
		return true
	}
	return false
}

// humanDuration rounds d for messages: days when it is at least two days.
func humanDuration(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	return d.Round(time.Minute).String()
}
