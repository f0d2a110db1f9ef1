package tls

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.Asset = (*KeyAlgorithm)(nil)

// Validity periods of the certificates kiln issues.
const (
	// CAValidity is the lifetime of the certificate authorities.
	CAValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is the default lifetime of serving and client
	// certificates that outlive the bootstrap machine (Lifetimes holds a
	// cluster's own).
	LeafValidity = types.DefaultLeafValidity
	// BootstrapValidity is the lifetime of credentials used only while the
	// bootstrap machine exists; the Ignition configs must be used within
	// half of it.
	BootstrapValidity = 24 * time.Hour
)

// KeyAlgorithmEnv is the environment variable that selects the key type of
// newly generated keys: "ecdsa" (ECDSA P-256, the default) or "rsa" (RSA 2048).
const KeyAlgorithmEnv = "KILN_KEY_ALGORITHM"

// Algorithm names a private key type.
type Algorithm string

// Supported key types.
const (
	// ECDSAP256 is ECDSA on the NIST P-256 curve, the default.
	ECDSAP256 Algorithm = "ecdsa-p256"
	// RSA2048 is a 2048-bit RSA key.
	RSA2048 Algorithm = "rsa-2048"
)

// rsaBits is the size of RSA keys.
const rsaBits = 2048

// ParseAlgorithm reads a key type name as accepted in KILN_KEY_ALGORITHM;
// the empty string means ECDSAP256.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "ecdsa", string(ECDSAP256):
		return ECDSAP256, nil
	case "rsa", string(RSA2048):
		return RSA2048, nil
	}
	return "", fmt.Errorf("unsupported key algorithm %q: use ecdsa (ECDSA P-256) or rsa (RSA 2048)", s)
}

// NewKey generates a private key of type a.
func (a Algorithm) NewKey() (crypto.Signer, error) {
	switch a {
	case ECDSAP256, "":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, rsaBits)
	}
	return nil, fmt.Errorf("unsupported key algorithm %q", a)
}

// KeyAlgorithm is the key type of every key kiln generates for a cluster. It
// is read once from KILN_KEY_ALGORITHM and kept in the state file, so a
// resumed run keeps the key type it started with.
type KeyAlgorithm struct {
	// Algorithm is the key type.
	Algorithm Algorithm `json:"algorithm"`
}

// ID implements graph.Asset.
func (*KeyAlgorithm) ID() string { return "tls/key-algorithm" }

// Name implements graph.Asset.
func (*KeyAlgorithm) Name() string { return "TLS key algorithm" }

// Dependencies implements graph.Asset.
func (*KeyAlgorithm) Dependencies() []graph.Asset { return nil }

// Generate reads KILN_KEY_ALGORITHM.
func (k *KeyAlgorithm) Generate(context.Context, graph.Parents) error {
	a, err := ParseAlgorithm(os.Getenv(KeyAlgorithmEnv))
	if err != nil {
		return &graph.InputError{Err: fmt.Errorf("%s: %w", KeyAlgorithmEnv, err)}
	}
	k.Algorithm = a
	return nil
}
