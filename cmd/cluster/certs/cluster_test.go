package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/platforms/netroute"
	"github.com/kiln-project/kiln/platforms/netroute/netroutetest"
)

// kubeletNode is a Node whose kubelet listens on 127.0.0.1:port.
func kubeletNode(name string, port int) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	return n
}

// closedPort returns a loopback port that refuses connections for the
// rest of the test.
func closedPort(t *testing.T) int {
	t.Helper()
	return int(netip.MustParseAddrPort(netroutetest.RefusingAddr(t)).Port())
}

func issuedCSR(name, signer string, cert pair) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Username: "system:bootstrap:abcdef"},
		Status:     certificatesv1.CertificateSigningRequestStatus{Certificate: cert.pemOf()},
	}
}

func TestFromCluster(t *testing.T) {
	year := 365 * 24 * time.Hour
	root := issue(t, "kiln-root-ca", now.Add(10*year), nil, true)
	served := issue(t, "system:node:m0", now.Add(year), &root, false, "127.0.0.1")
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = tlsConfig(served)
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	oldServing := issue(t, "system:node:w0", now.Add(year/2), &root, false)
	newServing := issue(t, "system:node:w0", now.Add(year), &root, false)
	client := issue(t, "system:node:w0", now.Add(year), &root, false)
	cs := fake.NewClientset(
		kubeletNode("w1", closedPort(t)), kubeletNode("w0", closedPort(t)), kubeletNode("m0", port),
		issuedCSR("csr-old", certificatesv1.KubeletServingSignerName, oldServing),
		issuedCSR("csr-new", certificatesv1.KubeletServingSignerName, newServing),
		issuedCSR("csr-client", certificatesv1.KubeAPIServerClientKubeletSignerName, client),
		issuedCSR("csr-other", certificatesv1.KubeAPIServerClientSignerName, issue(t, "system:node:w1", now.Add(year), &root, false)),
		&certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "pending"},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName}},
	)
	entries, err := FromCluster(context.Background(), cs, netroute.Dialer{}, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	want := []string{
		"node/m0 kubelet serving",                 // read from the TLS handshake
		"node/w0 kubelet serving (CSR csr-new)",   // unreachable: the newest issued CSR
		"node/w0 kubelet client (CSR csr-client)", // the client certificate's CSR still exists
		"node/w1 kubelet serving",                 // unreachable, no CSR: the error
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if !entries[0].Cert.Equal(served.cert) {
		t.Error("m0: not the certificate the kubelet serves")
	}
	if !entries[1].Cert.Equal(newServing.cert) || !entries[2].Cert.Equal(client.cert) {
		t.Error("w0: not the newest certificates of its CSRs")
	}
	if entries[3].Cert != nil || entries[3].Err == nil || !strings.Contains(entries[3].Err.Error(), "TLS handshake with 127.0.0.1:") {
		t.Errorf("w1: entry %+v, want the dial error", entries[3])
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("FromCluster made a %s request; it must only read", a.GetVerb())
		}
	}
	// The nodes' certificates are attributed to the cluster CA of --dir.
	ca := Entry{Name: "tls/root-ca", Cert: root.cert}
	for _, e := range entries[:3] {
		if got := issuerName(e, append([]Entry{ca}, entries...)); got != "tls/root-ca" {
			t.Errorf("%s: CA %q, want tls/root-ca", e.Name, got)
		}
	}
}

// On a master FromCluster reads the certificates served on the master
// ports too: one whose server wants a client certificate (etcd's) as
// well, and an error entry for a port that refuses.
func TestFromClusterMasterPorts(t *testing.T) {
	year := 365 * 24 * time.Hour
	root := issue(t, "kiln-root-ca", now.Add(10*year), nil, true)
	api := issue(t, "kube-apiserver", now.Add(year), &root, false, "127.0.0.1")
	etcd := issue(t, "system:etcd-peer:m0", now.Add(year), &root, false, "127.0.0.1")
	apiSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	apiSrv.TLS = tlsConfig(api)
	apiSrv.StartTLS()
	defer apiSrv.Close()
	etcdSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	etcdSrv.TLS = tlsConfig(etcd)
	etcdSrv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	etcdSrv.StartTLS()
	defer etcdSrv.Close()
	portOf := func(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }
	master := kubeletNode("m0", closedPort(t))
	master.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	cs := fake.NewClientset(master, kubeletNode("w0", closedPort(t)))
	ports := []ServedPort{{portOf(apiSrv), "kube-apiserver serving"}, {portOf(etcdSrv), "etcd peer"}, {closedPort(t), "machine-config server serving"}}
	entries, err := FromCluster(context.Background(), cs, netroute.Dialer{}, 2*time.Second, ports)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	var names []string
	for _, e := range entries {
		got[e.Name], names = e, append(names, e.Name)
	}
	apiName := fmt.Sprintf("node/m0 kube-apiserver serving (:%d)", portOf(apiSrv))
	etcdName := fmt.Sprintf("node/m0 etcd peer (:%d)", portOf(etcdSrv))
	mcsName := fmt.Sprintf("node/m0 machine-config server serving (:%d)", ports[2].Port)
	if len(entries) != 5 {
		t.Fatalf("entries %q, want the kubelets' and m0's three ports (none for the worker)", names)
	}
	if e := got[apiName]; e.Cert == nil || !e.Cert.Equal(api.cert) {
		t.Errorf("%s: %+v", apiName, e)
	}
	if e := got[etcdName]; e.Cert == nil || !e.Cert.Equal(etcd.cert) {
		t.Errorf("%s (a server that wants a client certificate): %+v", etcdName, e)
	}
	if e := got[mcsName]; e.Cert != nil || e.Err == nil {
		t.Errorf("%s (refused): %+v, want the error", mcsName, e)
	}
}
