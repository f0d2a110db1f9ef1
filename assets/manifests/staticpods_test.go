package manifests

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/tls"
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

// apiServerFlags returns the kube-apiserver container's command-line flags
// of a rendered static pod as name -> value.
func apiServerFlags(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("kube-apiserver pod has %d containers", len(pod.Spec.Containers))
	}
	flags := map[string]string{}
	for _, arg := range pod.Spec.Containers[0].Command[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		flags[name] = value
	}
	return flags
}

// TestAPIServerJWKSURICoveredByCertificate checks, for the bootstrap's and
// the masters' kube-apiserver, that the OIDC discovery document points at a
// JWKS URL the shared serving certificate is valid for: the default
// (https://<advertise address>:6443) is not in the certificate, so a pod
// validating its token against the discovery document failed (issue 8).
// The URL has the issuer's host, so a client that could fetch the discovery
// document from the issuer can fetch the keys too.
func TestAPIServerJWKSURICoveredByCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(installConfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap, master, serving := &BootstrapStaticPods{}, &MasterStaticPods{}, &tls.APIServer{}
	if err := s.Fetch(context.Background(), bootstrap, master, serving); err != nil {
		t.Fatal(err)
	}
	cert, err := serving.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	for role, pods := range map[string]*staticPods{"bootstrap": &bootstrap.staticPods, "master": &master.staticPods} {
		data, ok := pods.File("kube-apiserver.yaml")
		if !ok {
			t.Fatalf("%s: no kube-apiserver.yaml", role)
		}
		flags := apiServerFlags(t, data)
		const want = "https://kubernetes.default.svc.cluster.local/openid/v1/jwks"
		if got := flags["service-account-jwks-uri"]; got != want {
			t.Errorf("%s: --service-account-jwks-uri = %q, want %q", role, got, want)
		}
		jwks, err := url.Parse(flags["service-account-jwks-uri"])
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		issuer, err := url.Parse(flags["service-account-issuer"])
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if jwks.Scheme != "https" || jwks.Host != issuer.Host {
			t.Errorf("%s: JWKS URL %s is not https on the issuer's host %s", role, jwks, issuer.Host)
		}
		if err := cert.VerifyHostname(jwks.Hostname()); err != nil {
			t.Errorf("%s: the serving certificate does not cover the JWKS URL: %v", role, err)
		}
	}
}
