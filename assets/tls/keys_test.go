package tls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"testing"
)

func mustECDSA(t *testing.T, k crypto.Signer) *ecdsa.PrivateKey {
	t.Helper()
	e, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("key is %T, want ECDSA", k)
	}
	return e
}

func mustRSA(t *testing.T, k crypto.Signer) *rsa.PrivateKey {
	t.Helper()
	r, ok := k.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("key is %T, want RSA", k)
	}
	return r
}
