package certrenew

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// pair is a certificate and its key, PEM, with the parsed certificate.
type pair struct {
	cert, key []byte
	parsed    *x509.Certificate
	signer    *ecdsa.PrivateKey
}

func newPair(t *testing.T, cn string, parent *pair, notBefore time.Time, lifetime time.Duration) *pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore.Add(-5 * time.Minute), NotAfter: notBefore.Add(lifetime), BasicConstraintsValid: true, // backdated as kiln issues them
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{cn + ".example"},
	}
	issuer, signer := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.KeyUsage, tmpl.ExtKeyUsage, tmpl.DNSNames = true, x509.KeyUsageCertSign, nil, nil
	} else {
		issuer, signer = parent.parsed, parent.signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := x509.ParseCertificate(der)
	pk, _ := x509.MarshalPKCS8PrivateKey(key)
	return &pair{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
		parsed: parsed, signer: key,
	}
}

func write(t *testing.T, root, p string, data []byte, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, mode); err != nil {
		t.Fatal(err)
	}
}

// master is a master's files: three CAs with their keys, leaves of each
// issued at issued for lifetime, and the controller manager's kubeconfig.
type master struct {
	root                 string
	rootCA, fpCA, etcdCA *pair
}

func newMaster(t *testing.T, issued time.Time, lifetime time.Duration) master {
	t.Helper()
	m := master{root: t.TempDir()}
	caFrom := issued.Add(-time.Hour)
	m.rootCA, m.fpCA, m.etcdCA = newPair(t, "root", nil, caFrom, 87600*time.Hour), newPair(t, "fp", nil, caFrom, 87600*time.Hour), newPair(t, "etcd", nil, caFrom, 87600*time.Hour)
	for p, ca := range map[string]*pair{nodelayout.PKIDir + "/ca": m.rootCA, nodelayout.PKIDir + "/front-proxy-ca": m.fpCA, nodelayout.EtcdPKIDir + "/ca": m.etcdCA} {
		write(t, m.root, p+".crt", ca.cert, 0o644)
		write(t, m.root, p+".key", ca.key, 0o600)
	}
	leaves := map[string]*pair{
		nodelayout.PKIDir + "/apiserver":          m.rootCA,
		nodelayout.PKIDir + "/front-proxy-client": m.fpCA,
		nodelayout.EtcdPKIDir + "/peer":           m.etcdCA,
		nodelayout.MCSConfigDir + "/tls":          m.rootCA,
	}
	for p, ca := range leaves {
		l := newPair(t, filepath.Base(p), ca, issued, lifetime)
		write(t, m.root, p+".crt", l.cert, 0o644)
		write(t, m.root, p+".key", l.key, 0o600)
	}
	client := newPair(t, "system:kube-controller-manager", m.rootCA, issued, lifetime)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://localhost:6443", CertificateAuthorityData: m.rootCA.cert}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: client.cert, ClientKeyData: client.key}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	write(t, m.root, nodelayout.KubeconfigDir+"/controller-manager.kubeconfig", data, 0o600)
	return m
}

func (m master) renewer(before time.Duration, now time.Time, installed *[]certbundle.Bundle) *Renewer {
	return &Renewer{
		Root: m.root, Before: before, Now: func() time.Time { return now }, Log: logrus.New(),
		Install: func(_ context.Context, b certbundle.Bundle) error {
			*installed = append(*installed, b)
			return nil
		},
	}
}

func TestRenewsWhatIsDueFromItsOwnCA(t *testing.T) {
	issued := time.Now().Add(-50 * time.Minute)
	m := newMaster(t, issued, time.Hour)
	var got []certbundle.Bundle
	now := time.Now()
	if err := m.renewer(15*time.Minute, now, &got).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("installed %d bundles, want 1", len(got))
	}
	b := got[0]
	if err := b.Check(); err != nil {
		t.Errorf("the bundle would be refused: %v", err)
	}
	var paths []string
	for _, f := range b.Files {
		paths = append(paths, f.Path)
	}
	want := []string{
		nodelayout.PKIDir + "/apiserver.crt", nodelayout.PKIDir + "/front-proxy-client.crt",
		nodelayout.EtcdPKIDir + "/peer.crt", nodelayout.MCSConfigDir + "/tls.crt",
		nodelayout.KubeconfigDir + "/controller-manager.kubeconfig",
	}
	if !slices.Equal(slices.Sorted(slices.Values(paths)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("renewed %v, want %v (keys stay)", paths, want)
	}
	signers := map[string]*pair{"apiserver.crt": m.rootCA, "front-proxy-client.crt": m.fpCA, "peer.crt": m.etcdCA, "tls.crt": m.rootCA}
	for _, f := range b.Files {
		data := f.Data
		if strings.HasSuffix(f.Path, ".kubeconfig") {
			kc, err := clientcmd.Load(f.Data)
			if err != nil {
				t.Fatal(err)
			}
			data = kc.AuthInfos["u"].ClientCertificateData
			if kc.Clusters["c"].Server != "https://localhost:6443" || f.Mode != 0o600 {
				t.Errorf("the kubeconfig lost its cluster or mode: %+v %v", kc.Clusters["c"], f.Mode)
			}
		}
		c, err := leaf(data)
		if err != nil {
			t.Fatal(err)
		}
		ca := signers[filepath.Base(f.Path)]
		if ca == nil {
			ca = m.rootCA
		}
		if err := c.CheckSignatureFrom(ca.parsed); err != nil {
			t.Errorf("%s: not signed by %s: %v", f.Path, ca.parsed.Subject.CommonName, err)
		}
		if c.NotAfter.Before(now.Add(59*time.Minute)) || c.NotAfter.After(now.Add(61*time.Minute)) {
			t.Errorf("%s: until %s, want the lifetime of an hour from now", f.Path, c.NotAfter)
		}
		old, _ := os.ReadFile(filepath.Join(m.root, f.Path))
		if bytes.Equal(old, f.Data) {
			t.Errorf("%s: the bundle holds the old file", f.Path)
		}
	}
	if !strings.HasPrefix(b.Run, "auto-") {
		t.Errorf("run %q", b.Run)
	}
}

func TestNothingDueInstallsNothing(t *testing.T) {
	m := newMaster(t, time.Now(), 24*time.Hour)
	var got []certbundle.Bundle
	r := m.renewer(time.Hour, time.Now(), &got)
	p, err := r.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Renewed) != 0 || p.NextPath == "" || p.Next.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("plan %+v, want nothing due and the next expiry in a day", p)
	}
	if err := r.Run(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("Run = %v, installed %d bundles", err, len(got))
	}
}

// Without the etcd CA's key (pki.renewal Manual) the etcd certificates
// are named in the error; the rest is renewed all the same.
func TestMissingCAKeyNamedOthersRenewed(t *testing.T) {
	m := newMaster(t, time.Now().Add(-50*time.Minute), time.Hour)
	if err := os.Remove(filepath.Join(m.root, nodelayout.EtcdPKIDir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	var got []certbundle.Bundle
	err := m.renewer(15*time.Minute, time.Now(), &got).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), nodelayout.EtcdPKIDir+"/peer.crt") || !strings.Contains(err.Error(), "kiln certs renew") {
		t.Errorf("Run = %v, want the etcd peer certificate named", err)
	}
	if len(got) != 1 || len(got[0].Files) != 4 {
		t.Errorf("installed %v, want the 4 others", got)
	}
}

// A certificate file that is a link is not read: root never follows one.
func TestLinkRefused(t *testing.T) {
	m := newMaster(t, time.Now().Add(-50*time.Minute), time.Hour)
	p := filepath.Join(m.root, nodelayout.PKIDir, "ca.crt")
	if err := os.Rename(p, p+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p+".real", p); err != nil {
		t.Fatal(err)
	}
	var got []certbundle.Bundle
	if err := m.renewer(15*time.Minute, time.Now(), &got).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Run with the root CA a link = %v", err)
	}
	if len(got) != 0 {
		t.Errorf("installed %d bundles", len(got))
	}
}
