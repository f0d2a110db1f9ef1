package tls

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*ServiceAccountKeyPair)(nil)

// pubSuffix is the file suffix of a public key.
const pubSuffix = ".pub"

// ServiceAccountKeyPair is the key pair that signs and verifies service
// account tokens: kube-apiserver reads Key (--service-account-signing-key-file)
// and Pub (--service-account-key-file), kube-controller-manager reads Key
// (--service-account-private-key-file). Its files are
// tls/service-account.key (0600) and tls/service-account.pub (0644).
type ServiceAccountKeyPair struct {
	// Key is the PEM PKCS#8 private key. It is a secret: never log it.
	Key []byte `json:"key"`
	// Pub is the PEM PKIX public key.
	Pub []byte `json:"pub"`
}

// ID implements graph.Asset.
func (*ServiceAccountKeyPair) ID() string { return "tls/service-account" }

// Name implements graph.Asset.
func (*ServiceAccountKeyPair) Name() string { return "service account signing key pair" }

// Dependencies implements graph.Asset.
func (*ServiceAccountKeyPair) Dependencies() []graph.Asset { return []graph.Asset{&KeyAlgorithm{}} }

// InputKind implements graph.Sized.
func (*ServiceAccountKeyPair) InputKind() graph.Input { return graph.TLSInput }

// CheckState implements graph.StateChecker: a pair restored from the state
// file must parse and the public key must belong to the private key. An
// empty pair (none made yet) passes.
func (s *ServiceAccountKeyPair) CheckState() error {
	if len(s.Key) == 0 && len(s.Pub) == 0 {
		return nil
	}
	key, err := parseKey(s.Key)
	if err != nil {
		return fmt.Errorf("the private key does not parse: %w", err)
	}
	b, _ := pem.Decode(s.Pub)
	if b == nil || b.Type != pemPublicKey {
		return fmt.Errorf("the public key is not a PEM %s block", pemPublicKey)
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return fmt.Errorf("the public key does not parse: %w", err)
	}
	if !publicKeyMatches(pub, key) {
		return errors.New("the public key does not belong to the private key (one was swapped for another)")
	}
	return nil
}

// String keeps the private key out of formatted output.
func (*ServiceAccountKeyPair) String() string { return "service account key pair (key redacted)" }

// GoString keeps the private key out of %#v output.
func (s *ServiceAccountKeyPair) GoString() string { return s.String() }

// Generate creates the key pair.
func (s *ServiceAccountKeyPair) Generate(ctx context.Context, p graph.Parents) error {
	alg := &KeyAlgorithm{}
	if err := p.Get(alg); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	key, err := alg.Algorithm.NewKey()
	if err != nil {
		return fmt.Errorf("generate %s key: %w", alg.Algorithm, err)
	}
	if s.Key, err = encodeKey(key); err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	if s.Pub, err = encodePublicKey(key.Public()); err != nil {
		return fmt.Errorf("encode public key: %w", err)
	}
	return nil
}

// Files implements graph.WritableAsset.
func (s *ServiceAccountKeyPair) Files() []*graph.File {
	if len(s.Key) == 0 {
		return nil
	}
	return []*graph.File{
		{Path: s.ID() + keySuffix, Data: s.Key, Mode: keyMode},
		{Path: s.ID() + pubSuffix, Data: s.Pub, Mode: certMode},
	}
}

// Load reuses a key pair the user put in --dir: both files must be present
// and the public key must belong to the private key.
func (s *ServiceAccountKeyPair) Load(f graph.FileFetcher) (bool, error) {
	keyPath, pubPath := s.ID()+keySuffix, s.ID()+pubSuffix
	pair, found, err := fetchPair(f, pubPath, keyPath)
	if !found || err != nil {
		return found, err
	}
	key, err := parseKey(pair.Key)
	if err != nil {
		return true, inputError(keyPath, "not a PEM private key: %w", err)
	}
	b, _ := pem.Decode(pair.Cert)
	if b == nil || b.Type != pemPublicKey {
		return true, inputError(pubPath, "not a PEM %s block", pemPublicKey)
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return true, inputError(pubPath, "not a PEM public key: %w", err)
	}
	if !publicKeyMatches(pub, key) {
		return true, inputError(pubPath, "public key does not belong to the private key %s", keyPath)
	}
	s.Key, s.Pub = pair.Key, pair.Cert
	return true, nil
}
