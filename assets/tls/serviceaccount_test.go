package tls

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

func TestServiceAccountKeyPair(t *testing.T) {
	for _, alg := range []Algorithm{ECDSAP256, RSA2048} {
		t.Run(string(alg), func(t *testing.T) {
			s := &miniStore{given: []graph.Asset{&KeyAlgorithm{Algorithm: alg}}}
			done, _ := s.mustRun(t, &ServiceAccountKeyPair{})
			sa := done["tls/service-account"].(*ServiceAccountKeyPair)
			key, err := parseKey(sa.Key)
			if err != nil {
				t.Fatal(err)
			}
			checkKeyType(t, key.Public(), alg)
			b, _ := pem.Decode(sa.Pub)
			pub, err := x509.ParsePKIXPublicKey(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !publicKeyMatches(pub, key) {
				t.Error("public key does not belong to the private key")
			}

			dir := fakeFetcher{}
			for _, f := range sa.Files() {
				dir[f.Path] = f.Data
			}
			var loaded ServiceAccountKeyPair
			if found, err := loaded.Load(dir); !found || err != nil {
				t.Fatalf("Load = %v, %v; want true, nil", found, err)
			}
			if string(loaded.Key) != string(sa.Key) || string(loaded.Pub) != string(sa.Pub) {
				t.Error("loaded key pair differs from the files")
			}
		})
	}
}

func TestServiceAccountKeyPairLoadErrors(t *testing.T) {
	a, b := ServiceAccountKeyPair{}, ServiceAccountKeyPair{}
	for _, sa := range []*ServiceAccountKeyPair{&a, &b} {
		s := &miniStore{given: []graph.Asset{&KeyAlgorithm{Algorithm: ECDSAP256}}}
		done, _ := s.mustRun(t, &ServiceAccountKeyPair{})
		*sa = *done["tls/service-account"].(*ServiceAccountKeyPair)
	}
	const key, pub = "tls/service-account.key", "tls/service-account.pub"
	tests := []struct {
		name     string
		files    fakeFetcher
		wantPath string
	}{
		{"public key of another key", fakeFetcher{key: a.Key, pub: b.Pub}, pub},
		{"public key missing", fakeFetcher{key: a.Key}, pub},
		{"private key missing", fakeFetcher{pub: a.Pub}, key},
		{"garbage private key", fakeFetcher{key: []byte("x"), pub: a.Pub}, key},
		{"certificate instead of public key", fakeFetcher{key: a.Key, pub: mustIssue(t, nil, certSpec{Usage: usageCA}).Cert}, pub},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sa ServiceAccountKeyPair
			_, err := sa.Load(tt.files)
			var fe *FileError
			if !graph.IsInputError(err) || !errors.As(err, &fe) || fe.Path != tt.wantPath {
				t.Errorf("error %v, want an input error naming %s", err, tt.wantPath)
			}
		})
	}
}
