package kubeconfig

import (
	"context"
	cryptotls "crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
)

// TestHandshake serves HTTPS on loopback with kiln's real kube-apiserver
// certificate, requiring client certificates from the root CA like
// kube-apiserver's --client-ca-file, and connects with each certificate
// kubeconfig: the server name of the kubeconfig must be in the serving
// certificate and the server must see the expected user and group.
func TestHandshake(t *testing.T) {
	const vip = "192.168.126.10"
	ic := testInstallConfig(vip)
	alg, life := &tls.KeyAlgorithm{Algorithm: tls.ECDSAP256}, &tls.Lifetimes{Leaf: tls.LeafValidity}
	ca, serving := &tls.RootCA{}, &tls.APIServer{}
	generate(t, ca, alg)
	generate(t, serving, alg, ca, life, ic)
	clients := []graph.Asset{&tls.AdminClient{}, &tls.KubeControllerManagerClient{}, &tls.KubeSchedulerClient{}}
	for _, c := range clients {
		generate(t, c, alg, ca, life)
	}

	caCert, err := ca.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	pair, err := cryptotls.X509KeyPair(serving.Cert, serving.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		_, _ = io.WriteString(w, c.Subject.CommonName+"/"+strings.Join(c.Subject.Organization, ","))
	}))
	srv.TLS = &cryptotls.Config{
		Certificates: []cryptotls.Certificate{pair},
		ClientAuth:   cryptotls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	parents := append([]graph.Asset{ic, ca}, clients...)
	tests := []struct {
		name string
		a    asset
		want string
	}{
		{"admin via the API VIP", &Admin{}, "system:admin/system:masters"},
		{"localhost admin", &Localhost{}, "system:admin/system:masters"},
		{"kube-controller-manager", &KubeControllerManager{}, "system:kube-controller-manager/"},
		{"kube-scheduler", &KubeScheduler{}, "system:kube-scheduler/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			generate(t, tt.a, parents...)
			rc, err := clientcmd.RESTConfigFromKubeConfig(tt.a.Files()[0].Data)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(rc.Host)
			if err != nil {
				t.Fatal(err)
			}
			// Keep the kubeconfig's server name for verification, dial the test server.
			rc.TLSClientConfig.ServerName = u.Hostname()
			rc.Host = "https://" + net.JoinHostPort("127.0.0.1", port)
			if got := get(t, rc); got != tt.want {
				t.Errorf("server saw %q, want %q", got, tt.want)
			}
		})
	}
}

// get fetches / with rc and returns the body.
func get(t *testing.T, rc *rest.Config) string {
	t.Helper()
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, rc.Host+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
