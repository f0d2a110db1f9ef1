package tls

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/graph"
)

// installConfigYAML is a minimal install-config for the real engine.
const installConfigYAML = `apiVersion: kiln.dev/v1
metadata:
  name: demo
baseDomain: example.test
platform:
  local: {}
`

// newDir returns a --dir holding installConfigYAML and the given files.
func newDir(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	files["install-config.yaml"] = []byte(installConfigYAML)
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// persistTLS writes the TLS assets into dir with the real engine and returns
// them with the warnings it logged.
func persistTLS(t *testing.T, dir string) ([]graph.WritableAsset, []*logrus.Entry) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	s, err := graph.Open(dir, graph.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fetch(context.Background(), &Bundle{}); err != nil {
		t.Fatal(err)
	}
	assets := Assets()
	if err := s.Persist(context.Background(), graph.Target{Name: "tls", Assets: assets}); err != nil {
		t.Fatal(err)
	}
	var warnings []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			warnings = append(warnings, e)
		}
	}
	return assets, warnings
}

// TestEngineRoundTrip runs the TLS assets through graph.Store with a
// user-provided root CA: files get their modes, the CA is reused, and a
// second run regenerates nothing and warns about nothing.
func TestEngineRoundTrip(t *testing.T) {
	userCA := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "corp-ca"}, Usage: usageCA, Validity: CAValidity})
	dir := newDir(t, map[string][]byte{"tls/root-ca.crt": userCA.Cert, "tls/root-ca.key": userCA.Key})
	assets, w := persistTLS(t, dir)
	if len(w) > 0 {
		t.Errorf("first run warned: %v", w[0].Message)
	}
	first := map[string][]byte{}
	caCert, _ := userCA.Certificate()
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	for _, a := range assets {
		if len(a.Files()) == 0 {
			t.Errorf("%s has no files", a.ID())
		}
		for _, f := range a.Files() {
			st, err := os.Stat(filepath.Join(dir, f.Path))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != graph.ModeOf(f) || (filepath.Ext(f.Path) == ".key" && st.Mode().Perm() != 0o600) {
				t.Errorf("%s: mode %o, want %o", f.Path, st.Mode().Perm(), graph.ModeOf(f))
			}
			first[f.Path], _ = os.ReadFile(filepath.Join(dir, f.Path))
		}
	}
	if !bytes.Equal(first["tls/root-ca.crt"], userCA.Cert) || !bytes.Equal(first["tls/root-ca.key"], userCA.Key) {
		t.Error("the user's root CA was replaced")
	}
	apiserver, err := parseCert(first["tls/apiserver.crt"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apiserver.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.demo.example.test"}); err != nil {
		t.Errorf("tls/apiserver.crt is not signed by the user's CA for api.demo.example.test: %v", err)
	}

	if _, w := persistTLS(t, dir); len(w) > 0 {
		t.Errorf("second run warned: %v", w[0].Message)
	}
	for p, data := range first {
		now, _ := os.ReadFile(filepath.Join(dir, p))
		if !bytes.Equal(now, data) {
			t.Errorf("%s changed on the second run", p)
		}
	}
}

// TestEngineRejectsForeignLeaf puts a client certificate of another CA into
// --dir: the engine stops with an input error naming it.
func TestEngineRejectsForeignLeaf(t *testing.T) {
	other := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "other"}, Usage: usageCA})
	leaf := mustIssue(t, &other, certSpec{Subject: pkix.Name{CommonName: "system:admin"}, Usage: usageClient})
	dir := newDir(t, map[string][]byte{"tls/admin-client.crt": leaf.Cert, "tls/admin-client.key": leaf.Key})
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Fetch(context.Background(), &Bundle{})
	var fe *FileError
	if !graph.IsInputError(err) || !errors.As(err, &fe) || fe.Path != "tls/admin-client.crt" {
		t.Errorf("error %v, want an input error naming tls/admin-client.crt", err)
	}
}

// TestEngineUserCAAfterGeneration replaces a generated root CA with the
// user's: the leaves kiln wrote are stale and reissued by the user's CA.
func TestEngineUserCAAfterGeneration(t *testing.T) {
	dir := newDir(t, map[string][]byte{})
	persistTLS(t, dir)
	userCA := mustIssue(t, nil, certSpec{Subject: pkix.Name{CommonName: "corp-ca"}, Usage: usageCA, Validity: CAValidity})
	for p, data := range map[string][]byte{"tls/root-ca.crt": userCA.Cert, "tls/root-ca.key": userCA.Key} {
		if err := os.WriteFile(filepath.Join(dir, p), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	persistTLS(t, dir)
	caCert, _ := userCA.Certificate()
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	for _, p := range []string{"tls/apiserver.crt", "tls/admin-client.crt", "tls/machine-config-server.crt"} {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		cert, err := parseCert(data)
		if err != nil {
			t.Fatal(err)
		}
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s was not reissued by the user's CA: %v", p, err)
		}
	}
}

// TestEngineLeafValidity issues every leaf for pki.leafValidity, keeps the
// CAs' and the bootstrap-only certificate's lifetimes, and renews leaves
// from the same CA with graph.WithRenew.
func TestEngineLeafValidity(t *testing.T) {
	dir := t.TempDir()
	ic := installConfigYAML + "pki:\n  leafValidity: 240h\n"
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(ic), 0o600); err != nil {
		t.Fatal(err)
	}
	assets, _ := persistTLS(t, dir)
	lifetime := func(p string) time.Duration {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseCert(data)
		if err != nil {
			t.Fatal(err)
		}
		return c.NotAfter.Sub(c.NotBefore) - clockSkew
	}
	for _, a := range assets {
		p := a.ID() + ".crt"
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			continue
		}
		want := 240 * time.Hour
		switch a.ID() {
		case "tls/root-ca", "tls/etcd-ca", "tls/front-proxy-ca", "tls/kubelet-serving-ca":
			want = CAValidity
		case "tls/etcd-server":
			want = BootstrapValidity
		}
		if got := lifetime(p); got != want {
			t.Errorf("%s: lifetime %s, want %s", p, got, want)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, "tls/apiserver.crt"))
	ca, _ := os.ReadFile(filepath.Join(dir, "tls/root-ca.crt"))
	s, err := graph.Open(dir, graph.WithRenew("tls/apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(context.Background(), graph.Target{Name: "tls", Assets: Assets()}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "tls/apiserver.crt"))
	caAfter, _ := os.ReadFile(filepath.Join(dir, "tls/root-ca.crt"))
	if bytes.Equal(before, after) || !bytes.Equal(ca, caAfter) {
		t.Errorf("renewal: apiserver.crt changed %v, root CA kept %v; want a new leaf from the same CA", !bytes.Equal(before, after), bytes.Equal(ca, caAfter))
	}
	if got := lifetime("tls/apiserver.crt"); got != 240*time.Hour {
		t.Errorf("renewed tls/apiserver.crt: lifetime %s", got)
	}
}
