package tls

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExtendKeepsKeyNamesUsagesAndLifetime(t *testing.T) {
	ctx := context.Background()
	ca, err := issue(ctx, ECDSAP256, nil, certSpec{Subject: pkix.Name{CommonName: "ca"}, Usage: usageCA, Validity: CAValidity})
	if err != nil {
		t.Fatal(err)
	}
	old, err := issue(ctx, RSA2048, &ca, certSpec{
		Subject:  pkix.Name{CommonName: "kube-apiserver", Organization: []string{"o"}},
		DNSNames: []string{"api.example.com", "localhost"},
		IPs:      []net.IP{net.ParseIP("10.0.0.1")},
		Usage:    usageServer,
		Validity: 90 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Hour)
	data, err := Extend(&ca, old.Cert, now)
	if err != nil {
		t.Fatal(err)
	}
	was, _ := parseCert(old.Cert)
	got, err := parseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := ca.Certificate()
	if err := got.CheckSignatureFrom(caCert); err != nil {
		t.Errorf("not signed by the CA: %v", err)
	}
	if got.SerialNumber.Cmp(was.SerialNumber) == 0 {
		t.Error("same serial number")
	}
	if !bytes.Equal(got.RawSubjectPublicKeyInfo, was.RawSubjectPublicKeyInfo) {
		t.Error("the key changed")
	}
	if got.Subject.String() != was.Subject.String() || !slices.Equal(got.DNSNames, was.DNSNames) || len(got.IPAddresses) != 1 || !got.IPAddresses[0].Equal(was.IPAddresses[0]) {
		t.Errorf("names changed: %s %v %v, want %s %v %v", got.Subject, got.DNSNames, got.IPAddresses, was.Subject, was.DNSNames, was.IPAddresses)
	}
	if got.KeyUsage != was.KeyUsage || !slices.Equal(got.ExtKeyUsage, was.ExtKeyUsage) || got.IsCA {
		t.Errorf("usages changed: %v %v CA %v", got.KeyUsage, got.ExtKeyUsage, got.IsCA)
	}
	if !got.NotBefore.Equal(now.Add(-clockSkew).Truncate(time.Second)) || !got.NotAfter.Equal(now.Add(90*time.Minute).Truncate(time.Second)) {
		t.Errorf("valid %s to %s, want %s to %s", got.NotBefore, got.NotAfter, now.Add(-clockSkew), now.Add(90*time.Minute))
	}
}

func TestExtendRefusesWhatTheCADidNotSign(t *testing.T) {
	ctx := context.Background()
	ca, _ := issue(ctx, ECDSAP256, nil, certSpec{Subject: pkix.Name{CommonName: "ca"}, Usage: usageCA, Validity: CAValidity})
	other, _ := issue(ctx, ECDSAP256, nil, certSpec{Subject: pkix.Name{CommonName: "other"}, Usage: usageCA, Validity: CAValidity})
	leaf, _ := issue(ctx, ECDSAP256, &other, certSpec{Subject: pkix.Name{CommonName: "leaf"}, Usage: usageClient, Validity: time.Hour})
	if _, err := Extend(&ca, leaf.Cert, time.Now()); err == nil || !strings.Contains(err.Error(), "not signed by") {
		t.Errorf("Extend of another CA's leaf: %v", err)
	}
	if _, err := Extend(&ca, ca.Cert, time.Now()); err == nil || !strings.Contains(err.Error(), "is a CA") {
		t.Errorf("Extend of a CA: %v", err)
	}
	short, _ := issue(ctx, ECDSAP256, nil, certSpec{Subject: pkix.Name{CommonName: "short"}, Usage: usageCA, Validity: time.Hour})
	leaf, _ = issue(ctx, ECDSAP256, &short, certSpec{Subject: pkix.Name{CommonName: "leaf"}, Usage: usageClient, Validity: time.Hour})
	if _, err := Extend(&short, leaf.Cert, time.Now().Add(2*time.Hour)); err == nil || !strings.Contains(err.Error(), "has expired") {
		t.Errorf("Extend past the CA's end: %v", err)
	}
}
