package tls

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"testing"
	"time"
)

func TestIssueEtcdMember(t *testing.T) {
	ca := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "etcd"}, Usage: usageCA, Validity: CAValidity})
	caCert, _ := ca.Certificate()
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	ip := net.ParseIP("192.168.126.11").To4()
	const validity = 90 * 24 * time.Hour
	m, err := IssueEtcdMember(context.Background(), ECDSAP256, &ca, "master-0", []net.IP{ip}, validity)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		ck     CertKey
		cn, o  string
		hosts  []string
		absent string
	}{
		{"server", m.Server, "system:etcd-server:master-0", EtcdServersGroup,
			[]string{"localhost", "127.0.0.1", "::1", "master-0", "192.168.126.11"}, ""},
		{"peer", m.Peer, "system:etcd-peer:master-0", EtcdPeersGroup,
			[]string{"master-0", "192.168.126.11"}, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := tt.ck.Certificate()
			if err != nil {
				t.Fatal(err)
			}
			if cert.Subject.CommonName != tt.cn || !slices.Equal(cert.Subject.Organization, []string{tt.o}) {
				t.Errorf("subject %s, want CN=%s O=%s", cert.Subject, tt.cn, tt.o)
			}
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				for _, h := range tt.hosts {
					opts := x509.VerifyOptions{Roots: roots, DNSName: h, KeyUsages: []x509.ExtKeyUsage{usage}}
					if _, err := cert.Verify(opts); err != nil {
						t.Errorf("verify for %s, usage %v: %v", h, usage, err)
					}
				}
			}
			if tt.absent != "" && cert.VerifyHostname(tt.absent) == nil {
				t.Errorf("certificate is valid for %s", tt.absent)
			}
			if d := cert.NotAfter.Sub(cert.NotBefore); d != validity+clockSkew {
				t.Errorf("validity %s, want %s", d-clockSkew, validity)
			}
		})
	}
	if _, err := IssueEtcdMember(context.Background(), ECDSAP256, &ca, "master-0", nil, validity); err == nil {
		t.Error("a member without addresses was issued")
	}
}
