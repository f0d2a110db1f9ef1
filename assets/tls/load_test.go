package tls

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/graph"
)

// mustIssue issues a certificate for tests.
func mustIssue(t *testing.T, ca *CertKey, spec certSpec) CertKey {
	t.Helper()
	if spec.Validity == 0 {
		spec.Validity = time.Hour
		if spec.Usage == usageCA {
			spec.Validity = CAValidity // a user CA must outlive the leaves kiln issues
		}
	}
	ck, err := issue(context.Background(), ECDSAP256, ca, spec)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// expiredCert returns a client certificate signed by ca that expired an
// hour ago.
func expiredCert(t *testing.T, ca *CertKey) CertKey {
	t.Helper()
	key, err := ECDSAP256.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := ca.Certificate()
	caKey, _ := ca.PrivateKey()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "system:admin"},
		NotBefore:    time.Now().Add(-48 * time.Hour),
		NotAfter:     time.Now().Add(-time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := encodeKey(key)
	return CertKey{Cert: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), Key: keyPEM}
}

// put adds the files of ck as the asset id to f.
func put(f fakeFetcher, id string, ck CertKey) {
	f[id+certSuffix], f[id+keySuffix] = ck.Cert, ck.Key
}

func TestUserProvidedCAIsReused(t *testing.T) {
	userCA := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "corp-ca"}, Usage: usageCA, Validity: CAValidity})
	root := &RootCA{}
	userAdmin := mustIssue(t, &userCA, certSpec{
		Subject: pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}}, Usage: usageClient})
	dir := fakeFetcher{}
	put(dir, root.ID(), userCA)
	put(dir, (&AdminClient{}).ID(), userAdmin)

	s := &miniStore{fetcher: dir, given: []graph.Asset{&KeyAlgorithm{Algorithm: ECDSAP256}, testInstallConfig("")}}
	targets := make([]graph.Asset, 0, len(Assets()))
	for _, a := range Assets() {
		targets = append(targets, a)
	}
	done, loaded := s.mustRun(t, targets...)

	for _, a := range Assets() {
		want := a.ID() == root.ID() || a.ID() == (&AdminClient{}).ID()
		if loaded[a.ID()] != want {
			t.Errorf("%s loaded from --dir = %v, want %v", a.ID(), loaded[a.ID()], want)
		}
	}
	if got := done[root.ID()].(*RootCA); !bytes.Equal(got.Cert, userCA.Cert) || !bytes.Equal(got.Key, userCA.Key) {
		t.Error("root CA is not the user's")
	}
	if got := done[(&AdminClient{}).ID()].(*AdminClient); !bytes.Equal(got.Cert, userAdmin.Cert) {
		t.Error("admin client certificate is not the user's")
	}
	caCert, _ := userCA.Certificate()
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	for _, id := range []string{"tls/apiserver", "tls/apiserver-kubelet-client", "tls/kube-controller-manager-client",
		"tls/kube-scheduler-client", "tls/machine-config-server"} {
		cert, err := done[id].(caAsset).certKey().Certificate()
		if err != nil {
			t.Fatal(err)
		}
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s is not signed by the user's CA: %v", id, err)
		}
	}
}

func TestLoadRejectsBrokenUserFiles(t *testing.T) {
	rootCA := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "ca"}, Usage: usageCA})
	admin := mustIssue(t, &rootCA, certSpec{Subject: pkix.Name{CommonName: "system:admin"}, Usage: usageClient})
	otherKey := mustIssue(t, &rootCA, certSpec{Subject: pkix.Name{CommonName: "x"}, Usage: usageClient}).Key
	const (
		caCrt, caKey = "tls/root-ca.crt", "tls/root-ca.key"
		adminCrt     = "tls/admin-client.crt"
	)
	tests := []struct {
		name     string
		files    fakeFetcher
		asset    graph.WritableAsset
		wantPath string
	}{
		{"garbage certificate", fakeFetcher{caCrt: []byte("not pem"), caKey: rootCA.Key}, &RootCA{}, caCrt},
		{"garbage key", fakeFetcher{caCrt: rootCA.Cert, caKey: []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}, &RootCA{}, caKey},
		{"key of another certificate", fakeFetcher{caCrt: rootCA.Cert, caKey: otherKey}, &RootCA{}, caKey},
		{"key without certificate", fakeFetcher{caKey: rootCA.Key}, &RootCA{}, caCrt},
		{"certificate without key", fakeFetcher{caCrt: rootCA.Cert}, &RootCA{}, caKey},
		{"leaf where a CA belongs", fakeFetcher{caCrt: admin.Cert, caKey: admin.Key}, &RootCA{}, caCrt},
		{"wrong usage", fakeFetcher{caCrt: rootCA.Cert, caKey: rootCA.Key}, &AdminClient{}, adminCrt},
		{"expired", fakeFetcher{caCrt: rootCA.Cert, caKey: rootCA.Key}, &AdminClient{}, adminCrt},
	}
	// Cases that need a matching key next to a certificate built above.
	for i := range tests {
		switch tests[i].name {
		case "wrong usage":
			put(tests[i].files, "tls/admin-client", mustIssue(t, &rootCA, certSpec{Usage: usageServer}))
		case "expired":
			put(tests[i].files, "tls/admin-client", expiredCert(t, &rootCA))
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, err := tt.asset.Load(tt.files)
			if !found {
				t.Error("found = false, want true")
			}
			if !graph.IsInputError(err) {
				t.Fatalf("%v: not an input error", err)
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != tt.wantPath {
				t.Errorf("error %v does not name %s", err, tt.wantPath)
			}
		})
	}
}

func TestLoadAcceptsOtherKeyEncodings(t *testing.T) {
	ca := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "ca"}, Usage: usageCA})
	key, _ := ca.PrivateKey()
	rsaCA, err := issue(context.Background(), RSA2048, nil, certSpec{Subject: pkix.Name{CommonName: "rsa"}, Usage: usageCA, Validity: CAValidity})
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, _ := rsaCA.PrivateKey()
	ecDER, err := x509.MarshalECPrivateKey(mustECDSA(t, key))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ck   CertKey
	}{
		{"SEC 1 EC PRIVATE KEY", CertKey{ca.Cert, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})}},
		{"PKCS#1 RSA PRIVATE KEY", CertKey{rsaCA.Cert, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY",
			Bytes: x509.MarshalPKCS1PrivateKey(mustRSA(t, rsaKey))})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fakeFetcher{}
			put(dir, "tls/root-ca", tt.ck)
			var c RootCA
			if found, err := c.Load(dir); !found || err != nil {
				t.Fatalf("Load = %v, %v; want true, nil", found, err)
			}
		})
	}
}

func TestLoadNothing(t *testing.T) {
	for _, a := range Assets() {
		if found, err := a.Load(fakeFetcher{}); found || err != nil {
			t.Errorf("%s: Load of an empty dir = %v, %v; want false, nil", a.ID(), found, err)
		}
	}
}

func TestBundleRejectsCertificateOfAnotherCA(t *testing.T) {
	userCA := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "corp"}, Usage: usageCA})
	otherCA := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "other"}, Usage: usageCA})
	tests := []struct {
		name  string
		files fakeFetcher
	}{
		{"signed by another CA", fakeFetcher{}},
		{"its CA is generated", fakeFetcher{}},
	}
	put(tests[0].files, "tls/root-ca", userCA)
	put(tests[0].files, "tls/kube-scheduler-client", mustIssue(t, &otherCA, certSpec{Usage: usageClient}))
	put(tests[1].files, "tls/kube-scheduler-client", mustIssue(t, &userCA, certSpec{Usage: usageClient}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &miniStore{fetcher: tt.files, given: []graph.Asset{&KeyAlgorithm{Algorithm: ECDSAP256}, testInstallConfig("")}}
			_, _, err := s.run(context.Background(), &Bundle{})
			if !graph.IsInputError(err) {
				t.Fatalf("%v: not an input error", err)
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != "tls/kube-scheduler-client.crt" {
				t.Errorf("error %v does not name tls/kube-scheduler-client.crt", err)
			}
		})
	}
}

func TestBundle(t *testing.T) {
	s := &miniStore{given: []graph.Asset{&KeyAlgorithm{Algorithm: ECDSAP256}, testInstallConfig("")}}
	done, _ := s.mustRun(t, &Bundle{})
	b := done["tls/bundle"].(*Bundle)
	if len(b.Files) != 2*len(Assets()) {
		t.Errorf("bundle has %d files, want %d", len(b.Files), 2*len(Assets()))
	}
	for _, a := range Assets() {
		for _, f := range done[a.ID()].(graph.WritableAsset).Files() {
			if got := b.File(f.Path); got == nil || !bytes.Equal(got.Data, f.Data) {
				t.Errorf("bundle file %s differs from the asset's", f.Path)
			}
		}
	}
}

// TestIssuedCertsMatchDependencies keeps Bundle's table in step with the
// CA each asset declares.
func TestIssuedCertsMatchDependencies(t *testing.T) {
	table := map[string]string{}
	for _, is := range issuedCerts() {
		table[is.cert.ID()] = is.ca.ID()
	}
	for _, a := range Assets() {
		var ca string
		for _, d := range a.Dependencies() {
			if _, ok := d.(caAsset); ok {
				ca = d.ID()
			}
		}
		if table[a.ID()] != ca {
			t.Errorf("%s: Bundle checks it against %q, but it depends on the CA %q", a.ID(), table[a.ID()], ca)
		}
	}
}

// D8: weak keys and broken signatures in user PKI are refused naming the
// file; so is a CA that would cut short the lifetime of what it signs; a
// garbage key gets a message, not an ASN.1 dump.
func TestLoadRejectsWeakUserPKI(t *testing.T) {
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("testdata", "weak", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	short := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "short"}, Usage: usageCA, Validity: 48 * time.Hour})
	const caCrt, caKey = "tls/root-ca.crt", "tls/root-ca.key"
	for _, tc := range []struct {
		name, cert, key string
		ck              *CertKey
		wantPath        string
		wantMsg         string
	}{
		{name: "RSA-512 CA", cert: "rsa512-ca.crt", key: "rsa512-ca.key", wantPath: caKey, wantMsg: "RSA key of 512 bits is too weak"},
		{name: "RSA-1024 CA", cert: "rsa1024-ca.crt", key: "rsa1024-ca.key", wantPath: caKey, wantMsg: "RSA key of 1024 bits is too weak"},
		{name: "SHA-1 signed CA", cert: "sha1-ca.crt", key: "sha1-ca.key", wantPath: caCrt, wantMsg: "signed with SHA1-RSA"},
		{name: "CA with 2 days left", ck: &short, wantPath: caCrt, wantMsg: "before the certificates kiln issues with it (valid 365 days) would"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := fakeFetcher{}
			if tc.ck != nil {
				put(files, "tls/root-ca", *tc.ck)
			} else {
				files[caCrt], files[caKey] = read(tc.cert), read(tc.key)
			}
			found, err := (&RootCA{}).Load(files)
			if !found || !graph.IsInputError(err) {
				t.Fatalf("Load = %v, %v; want an input error", found, err)
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != tc.wantPath || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not name %s with %q", err, tc.wantPath, tc.wantMsg)
			}
		})
	}
	t.Run("garbage key", func(t *testing.T) {
		ca := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "ca"}, Usage: usageCA})
		files := fakeFetcher{caCrt: ca.Cert, caKey: []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}
		_, err := (&RootCA{}).Load(files)
		if err == nil || strings.Contains(err.Error(), "asn1") || !strings.Contains(err.Error(), caKey) {
			t.Errorf("error %q: want one naming %s without an ASN.1 dump", err, caKey)
		}
	})
}
