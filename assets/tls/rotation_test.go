package tls

import (
	"context"
	"crypto/x509"
	"testing"
	"time"
)

func TestNewCAKeepsTheSubjectWithANewKey(t *testing.T) {
	ctx := context.Background()
	for _, id := range RotatedCAIDs() {
		a, err := NewCA(ctx, ECDSAP256, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		b, err := NewCA(ctx, ECDSAP256, id)
		if err != nil {
			t.Fatal(err)
		}
		ca, _ := a.Certificate()
		cb, _ := b.Certificate()
		if !ca.IsCA || ca.Subject.String() != cb.Subject.String() || string(ca.SubjectKeyId) == string(cb.SubjectKeyId) {
			t.Errorf("%s: CA %v, subjects %q %q, same key id %v", id, ca.IsCA, ca.Subject, cb.Subject, string(ca.SubjectKeyId) == string(cb.SubjectKeyId))
		}
		if ca.NotAfter.Sub(ca.NotBefore) < CAValidity {
			t.Errorf("%s: valid %s, want %s", id, ca.NotAfter.Sub(ca.NotBefore), CAValidity)
		}
	}
	if _, err := NewCA(ctx, ECDSAP256, (&APIServer{}).ID()); err == nil {
		t.Error("NewCA of a leaf: no error")
	}
}

func TestIssueKubeletClient(t *testing.T) {
	ctx := context.Background()
	ca, err := NewCA(ctx, ECDSAP256, (&RootCA{}).ID())
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCA(ctx, ECDSAP256, (&RootCA{}).ID())
	pair, err := IssueKubeletClient(ctx, ECDSAP256, &ca, "w-0", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:w-0" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %q", cert.Subject)
	}
	for _, tc := range []struct {
		ca   CertKey
		want bool
	}{{ca, true}, {other, false}} {
		root, _ := tc.ca.Certificate()
		pool := x509.NewCertPool()
		pool.AddCert(root)
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if (err == nil) != tc.want {
			t.Errorf("verifies against a CA of the same name with another key: %v, want %v", err == nil, tc.want)
		}
	}
}
