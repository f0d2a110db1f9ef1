package tls

import (
	"context"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/graph/graphtest"
)

// A certificate pair or service account key pair restored from the state
// file must parse and belong together: a garbled or swapped CA key is
// caught when the state is read, not when a leaf is next issued with it.
func TestCheckState(t *testing.T) {
	ca := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "kiln-root-ca"}, Usage: usageCA})
	other := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "kiln-etcd-ca"}, Usage: usageCA})
	sa, sa2 := &ServiceAccountKeyPair{}, &ServiceAccountKeyPair{}
	for _, k := range []*ServiceAccountKeyPair{sa, sa2} {
		if err := k.Generate(context.Background(), graphtest.NewParents(k, &KeyAlgorithm{Algorithm: ECDSAP256})); err != nil {
			t.Fatal(err)
		}
	}
	garbage := []byte("-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n")
	tests := []struct {
		name  string
		value interface{ CheckState() error }
		want  string // in the error; "" for none
	}{
		{"CA", &RootCA{ca}, ""},
		{"none yet", &RootCA{}, ""},
		{"garbled key", &RootCA{CertKey{Cert: ca.Cert, Key: garbage}}, `the private key of "kiln-root-ca" does not parse`},
		{"no key", &RootCA{CertKey{Cert: ca.Cert}}, `the private key of "kiln-root-ca" does not parse`},
		{"swapped key", &RootCA{CertKey{Cert: ca.Cert, Key: other.Key}}, `the private key does not belong to the certificate "kiln-root-ca"`},
		{"garbled certificate", &EtcdCA{CertKey{Cert: []byte("junk"), Key: ca.Key}}, "the certificate does not parse"},
		{"service account", sa, ""},
		{"service account key garbled", &ServiceAccountKeyPair{Key: garbage, Pub: sa.Pub}, "the private key does not parse"},
		{"service account key swapped", &ServiceAccountKeyPair{Key: sa2.Key, Pub: sa.Pub}, "the public key does not belong to the private key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.value.CheckState()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckState = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("CheckState = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
