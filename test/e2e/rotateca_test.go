package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/graph/installdir"
)

// tokenClient returns a client of namespace ns (created) that
// authenticates with a service account token, which a CA rotation keeps
// valid (the service account key is not rotated), and reads the API's
// certificate without trusting it: a canary's client through every phase.
func tokenClient(t *testing.T, dir, ns string) kubernetes.Interface {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, rc := adminClientConfig(t, dir)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "canary"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "canary"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "canary", Namespace: ns}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hour := int64(3600)
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "canary", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: rc.Host, BearerToken: tok.Status.Token, Dial: clusterDial,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}) // the canary measures availability, not trust
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stateCA returns the certificate of CA asset id in dir's state file.
func stateCA(t *testing.T, dir, id string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, installdir.State))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Assets map[string]struct {
			Value struct {
				Cert []byte `json:"cert"`
			} `json:"value"`
		} `json:"assets"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(st.Assets[id].Value.Cert)
	if b == nil {
		t.Fatalf("%s: no certificate in the state", id)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// signedBy reports whether c verifies against ca alone.
func signedBy(c, ca *x509.Certificate) bool {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: c.NotBefore.Add(time.Minute)})
	return err == nil
}

// assertRotateCA is `kiln certs rotate-ca` on a healthy cluster whose
// masters are at the addresses masters and whose nodes (masters and
// workers) at nodes, while a canary writes through the API's address.
// Afterwards --dir's four CAs are new; every master serves, on the API,
// etcd's and the machine-config server's ports, a certificate of the new
// CAs and none of the old; every kubelet serves one of the new kubelet
// serving CA; kube-root-ca.crt holds the new root CA only; the old admin
// kubeconfig is refused and the new one works, as `kubectl logs` through
// the API to a kubelet does; every node is Ready.
func assertRotateCA(t *testing.T, kiln, dir string, masters, nodes []string) {
	t.Helper()
	ids := map[string]string{"root": "tls/root-ca", "etcd": "tls/etcd-ca", "kubelet": "tls/kubelet-serving-ca", "front-proxy": "tls/front-proxy-ca"}
	old := map[string]*x509.Certificate{}
	for k, id := range ids {
		old[k] = stateCA(t, dir, id)
	}
	oldKubeconfig, err := os.ReadFile(filepath.Join(dir, "auth", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cn := startCanary(t, tokenClient(t, dir, "e2e-rotate-ca"), "e2e-rotate-ca")
	start := time.Now()
	out, err := runKiln(t, kiln, 40*time.Minute, "certs", "rotate-ca", "--dir", dir)
	writes, errs := cn.finish()
	if err != nil {
		t.Fatalf("certs rotate-ca: %v\n%s", err, lastLines(out, 60))
	}
	t.Logf("certs rotate-ca (%d masters, %d nodes): %s; canary (service account token): %d writes, %d failed", len(masters), len(nodes), time.Since(start).Round(time.Second), writes, len(errs))
	assertOutput(t, "certs rotate-ca", out, "Phase introduce done", "Phase reissue done", "Phase kubelets done", "Phase retire done", "CA rotation complete")
	if _, err := os.Stat(filepath.Join(dir, installdir.RotateCAJournal)); !os.IsNotExist(err) {
		t.Errorf("the rotation's journal is still in --dir: %v", err)
	}
	cur := map[string]*x509.Certificate{}
	for k, id := range ids {
		cur[k] = stateCA(t, dir, id)
		if cur[k].Equal(old[k]) {
			t.Errorf("%s: --dir still has the old CA", id)
		}
	}
	ports := map[string]string{"6443": "root", "22623": "root", "2379": "etcd", "2380": "etcd"}
	for _, ip := range masters {
		for port, ca := range ports {
			addr := net.JoinHostPort(ip, port)
			c, err := servedCert(addr)
			if err != nil {
				t.Errorf("%s: %v", addr, err)
				continue
			}
			if !signedBy(c, cur[ca]) || signedBy(c, old[ca]) {
				t.Errorf("%s serves %q, not signed by the new %s CA (by the old: %v)", addr, c.Subject, ca, signedBy(c, old[ca]))
			}
		}
	}
	for _, ip := range nodes {
		addr := net.JoinHostPort(ip, "10250")
		c, err := servedCert(addr)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		if !signedBy(c, cur["kubelet"]) {
			t.Errorf("the kubelet at %s serves %q, not signed by the new kubelet serving CA", addr, c.Subject)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := adminClient(t, dir)
	cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, rest := pem.Decode([]byte(cm.Data["ca.crt"])); b == nil || strings.Contains(string(rest), "CERTIFICATE") || string(b.Bytes) != string(cur["root"].Raw) {
		t.Errorf("default/kube-root-ca.crt does not hold the new root CA alone:\n%s", cm.Data["ca.crt"])
	}
	nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nl.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready after the rotation", n.Name)
		}
	}
	// The API server reaches kubelets with the new CAs both ways.
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("CoreDNS pods: %v, %d", err, len(pods.Items))
	}
	if _, err := client.CoreV1().Pods("kube-system").GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx); err != nil {
		t.Errorf("logs of %s through the API after the rotation: %v", pods.Items[0].Name, err)
	}
	// The old admin kubeconfig: neither its CA nor its client certificate
	// is trusted any more.
	rc, err := clientcmd.RESTConfigFromKubeConfig(oldKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.Dial = clusterDial
	rc.Timeout = 20 * time.Second
	if _, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("the admin kubeconfig of the old CA still works")
	}
	rc.TLSClientConfig.CAData, rc.TLSClientConfig.Insecure = nil, true
	if _, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Error("the API server still accepts the client certificate of the old root CA")
	}
}
