package tls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/installconfigtest"
	"github.com/kiln-project/kiln/graph"
)

// testInstallConfig returns an install-config with an API VIP, or without
// one when vip is empty.
func testInstallConfig(vip string) *installconfig.InstallConfig { return installconfigtest.Local(vip) }

// certWant is what one certificate asset must contain.
type certWant struct {
	asset    graph.WritableAsset
	signer   caAsset // nil for a self-signed CA
	cn       string
	org      []string
	dns      []string
	ips      []string
	usage    usage
	validity time.Duration
}

// wantCerts lists every certificate asset with the install-config of
// testInstallConfig("192.168.126.10").
func wantCerts() []certWant {
	loop := []string{"127.0.0.1", "::1"}
	return []certWant{
		{asset: &RootCA{}, cn: "kiln-root-ca", usage: usageCA, validity: CAValidity},
		{asset: &EtcdCA{}, cn: "kiln-etcd-ca", usage: usageCA, validity: CAValidity},
		{asset: &FrontProxyCA{}, cn: "kiln-front-proxy-ca", usage: usageCA, validity: CAValidity},
		{asset: &KubeletServingCA{}, cn: "kiln-kubelet-serving-ca", usage: usageCA, validity: CAValidity},
		{asset: &APIServer{}, signer: &RootCA{}, cn: "kube-apiserver", usage: usageServer, validity: LeafValidity,
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster", "kubernetes.default.svc.cluster.local", "api.demo.example.test", "api-int.demo.example.test", "localhost"},
			ips: []string{"172.30.0.1", "192.168.126.10", "127.0.0.1", "::1"}},
		{asset: &APIServerKubeletClient{}, signer: &RootCA{}, cn: "kube-apiserver-kubelet-client",
			org: []string{KubeletAPIGroup}, usage: usageClient, validity: LeafValidity},
		{asset: &APIServerEtcdClient{}, signer: &EtcdCA{}, cn: "kube-apiserver-etcd-client", usage: usageClient, validity: LeafValidity},
		{asset: &EtcdServer{}, signer: &EtcdCA{}, cn: "etcd-server", usage: usageServerClient, validity: BootstrapValidity,
			dns: []string{"localhost"}, ips: loop},
		{asset: &FrontProxyClient{}, signer: &FrontProxyCA{}, cn: "front-proxy-client", usage: usageClient, validity: LeafValidity},
		{asset: &AdminClient{}, signer: &RootCA{}, cn: "system:admin", org: []string{"system:masters"},
			usage: usageClient, validity: LeafValidity},
		{asset: &KubeControllerManagerClient{}, signer: &RootCA{}, cn: "system:kube-controller-manager",
			usage: usageClient, validity: LeafValidity},
		{asset: &KubeSchedulerClient{}, signer: &RootCA{}, cn: "system:kube-scheduler", usage: usageClient, validity: LeafValidity},
		{asset: &MachineConfigServer{}, signer: &RootCA{}, cn: "machine-config-server", usage: usageServer, validity: LeafValidity,
			dns: []string{"api-int.demo.example.test"}, ips: []string{"192.168.126.10"}},
	}
}

func TestCertificates(t *testing.T) {
	for _, alg := range []Algorithm{ECDSAP256, RSA2048} {
		t.Run(string(alg), func(t *testing.T) {
			s := &miniStore{given: []graph.Asset{&KeyAlgorithm{Algorithm: alg}, testInstallConfig("192.168.126.10")}}
			targets := make([]graph.Asset, 0, len(wantCerts()))
			for _, w := range wantCerts() {
				targets = append(targets, w.asset)
			}
			start := time.Now().Truncate(time.Second)
			done, _ := s.mustRun(t, targets...)
			end := time.Now()
			for _, w := range wantCerts() {
				t.Run(w.asset.ID(), func(t *testing.T) {
					ck := done[w.asset.ID()].(caAsset).certKey()
					var ca *CertKey
					if w.signer != nil {
						ca = done[w.signer.ID()].(caAsset).certKey()
					}
					checkCert(t, ck, ca, w, alg, start, end)
				})
			}
		})
	}
}

// checkCert checks one generated certificate against w.
// Generation happened between start (truncated to whole seconds, as
// certificates store times) and end.
func checkCert(t *testing.T, ck, ca *CertKey, w certWant, alg Algorithm, start, end time.Time) {
	t.Helper()
	cert, err := ck.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ck.PrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if !publicKeyMatches(cert.PublicKey, key) {
		t.Error("key does not match certificate")
	}
	checkKeyType(t, key.Public(), alg)
	if cert.Subject.CommonName != w.cn || !slices.Equal(cert.Subject.Organization, w.org) {
		t.Errorf("subject CN=%q O=%q, want CN=%q O=%q", cert.Subject.CommonName, cert.Subject.Organization, w.cn, w.org)
	}
	if !slices.Equal(cert.DNSNames, w.dns) {
		t.Errorf("DNS SANs %q, want %q", cert.DNSNames, w.dns)
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, w.ips) {
		t.Errorf("IP SANs %q, want %q", ips, w.ips)
	}
	if !slices.Equal(cert.ExtKeyUsage, w.usage.extKeyUsages()) {
		t.Errorf("ExtKeyUsage %v, want %v", cert.ExtKeyUsage, w.usage.extKeyUsages())
	}
	if want := w.usage.keyUsage(key.Public()); cert.KeyUsage != want {
		t.Errorf("KeyUsage %b, want %b", cert.KeyUsage, want)
	}
	if cert.IsCA != (w.usage == usageCA) || !cert.BasicConstraintsValid {
		t.Errorf("IsCA %v (basic constraints valid %v), want %v", cert.IsCA, cert.BasicConstraintsValid, w.usage == usageCA)
	}
	if cert.NotAfter.Before(start.Add(w.validity)) || cert.NotAfter.After(end.Add(w.validity)) {
		t.Errorf("NotAfter %s, want %s after generation (%s..%s)", cert.NotAfter, w.validity, start, end)
	}
	if cert.NotBefore.Before(start.Add(-clockSkew)) || cert.NotBefore.After(end.Add(-clockSkew)) {
		t.Errorf("NotBefore %s, want %s before generation (%s..%s)", cert.NotBefore, clockSkew, start, end)
	}
	roots := x509.NewCertPool()
	if ca == nil {
		roots.AddCert(cert)
	} else {
		caCert, err := ca.Certificate()
		if err != nil {
			t.Fatal(err)
		}
		roots.AddCert(caCert)
	}
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	if w.usage != usageCA {
		opts.KeyUsages = w.usage.extKeyUsages()
	}
	if _, err := cert.Verify(opts); err != nil {
		t.Errorf("verify against its CA: %v", err)
	}
	for _, name := range append(slices.Clone(w.dns), w.ips...) {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("VerifyHostname(%s): %v", name, err)
		}
	}
}

// checkKeyType checks that pub is of type alg.
func checkKeyType(t *testing.T, pub any, alg Algorithm) {
	t.Helper()
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if alg != ECDSAP256 || k.Curve != elliptic.P256() {
			t.Errorf("ECDSA key on %s, want %s", k.Curve.Params().Name, alg)
		}
	case *rsa.PublicKey:
		if alg != RSA2048 || k.N.BitLen() != rsaBits {
			t.Errorf("RSA %d key, want %s", k.N.BitLen(), alg)
		}
	default:
		t.Errorf("key type %T, want %s", pub, alg)
	}
}

func TestAPIServerSANsWithoutVIP(t *testing.T) {
	ic := testInstallConfig("")
	res, err := ic.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	dns, ips := apiServerSANs(ic.Config, res)
	if slices.Contains(dns, "") {
		t.Errorf("empty DNS SAN in %q", dns)
	}
	want := []net.IP{net.IPv4(172, 30, 0, 1).To4(), net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}
	if !slices.EqualFunc(ips, want, net.IP.Equal) {
		t.Errorf("IP SANs %v, want %v", ips, want)
	}
}

func TestAPIVIPHostname(t *testing.T) {
	dns, ips := appendHost(nil, nil, "lb.example.test")
	if !slices.Equal(dns, []string{"lb.example.test"}) || len(ips) != 0 {
		t.Errorf("got DNS %q IPs %v, want the host name as a DNS SAN", dns, ips)
	}
}

func TestFilesAndModes(t *testing.T) {
	s := &miniStore{given: []graph.Asset{&KeyAlgorithm{Algorithm: ECDSAP256}, testInstallConfig("")}}
	targets := make([]graph.Asset, 0, len(Assets()))
	for _, a := range Assets() {
		targets = append(targets, a)
	}
	done, _ := s.mustRun(t, targets...)
	for _, a := range Assets() {
		files := done[a.ID()].(graph.WritableAsset).Files()
		if len(files) != 2 {
			t.Fatalf("%s: %d files, want 2", a.ID(), len(files))
		}
		for _, f := range files {
			wantMode := map[string]int{".crt": 0o644, ".pub": 0o644, ".key": 0o600}[f.Path[len(a.ID()):]]
			if wantMode == 0 || f.Path[:len(a.ID())] != a.ID() {
				t.Errorf("%s: unexpected file %s", a.ID(), f.Path)
			}
			if int(f.Mode) != wantMode {
				t.Errorf("%s: mode %o, want %o", f.Path, f.Mode, wantMode)
			}
			if len(f.Data) == 0 {
				t.Errorf("%s is empty", f.Path)
			}
		}
	}
}

func TestFormattingRedactsKeys(t *testing.T) {
	s := &miniStore{given: []graph.Asset{&KeyAlgorithm{Algorithm: ECDSAP256}, testInstallConfig("")}}
	done, _ := s.mustRun(t, &AdminClient{}, &ServiceAccountKeyPair{})
	admin := done["tls/admin-client"].(*AdminClient)
	sa := done["tls/service-account"].(*ServiceAccountKeyPair)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []struct {
			value any
			key   []byte
		}{{admin, admin.Key}, {sa, sa.Key}, {&admin.CertKey, admin.Key}} {
			out := fmt.Sprintf(verb, v.value)
			if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, string(v.key[40:80])) {
				t.Errorf("%s prints the private key: %s", verb, out)
			}
		}
	}
	if got := fmt.Sprint(admin); !strings.Contains(got, "CN=system:admin") {
		t.Errorf("%q does not name the certificate", got)
	}
}
