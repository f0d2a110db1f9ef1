package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/manifests/inventory"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// kubeletClientCert is where a joined kubelet keeps its client certificate
// and key (one PEM file; the kubelet's default --cert-dir).
const kubeletClientCert = "/var/lib/kubelet/pki/kubelet-client-current.pem"

// csrPatience is how long a CSR that must not be approved is watched.
const csrPatience = 20 * time.Second

// assertServingCSRApproval is issue 20's finding replayed on a running
// cluster with a worker (--dir dir, infra ID infraID): with nothing but the
// worker's own kubelet client certificate, read from the worker machine,
// it adds the API VIP and kubernetes.default.svc to its Node's status (a
// kubelet may write its own status) and asks for a kubelet serving
// certificate naming them, next to a CSR for its own name and the address
// kiln assigned it. The legitimate CSR must be approved and issued, by the
// kubelet serving CA; the other must still be pending after csrPatience,
// with the approver's reason in its log. Then the admin approves the bad
// CSR by hand, as a mistaken approver would: the certificate it gets must
// not verify as the API server against the CA of auth/kubeconfig.
//
// Call it from testCluster once the cluster is installed, e.g. after
// assertUserManifest (it changes nothing that outlives it but two deleted
// CSRs; the kubelet restores its Node's addresses itself).
func assertServingCSRApproval(t *testing.T, dir, infraID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, adminRC := adminClientConfig(t, dir)
	worker := infraID + "-worker-0"
	vip, err := url.Parse(adminRC.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiVIP := vip.Hostname()
	workerIP := inventoryAddress(ctx, t, admin, worker)

	// The worker's own credentials, and nothing else.
	mgr := machine.NewManager(machine.Options{})
	pemData, err := mgr.Exec(ctx, worker, "cat", kubeletClientCert)
	if err != nil {
		t.Fatalf("read %s on %s: %v", kubeletClientCert, worker, err)
	}
	node := kubernetes.NewForConfigOrDie(&rest.Config{
		Host: adminRC.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: adminRC.TLSClientConfig.CAData, CertData: pemData, KeyData: pemData,
		},
	})

	// The node claims the API VIP and kubernetes.default.svc in its status.
	patch, _ := json.Marshal([]map[string]any{
		{"op": "add", "path": "/status/addresses/-", "value": corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: apiVIP}},
		{"op": "add", "path": "/status/addresses/-", "value": corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "kubernetes.default.svc"}},
	})
	if _, err := node.CoreV1().Nodes().Patch(ctx, worker, types.JSONPatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the worker's kubelet credentials could not patch its Node's status (the finding's first step): %v", err)
	}
	// Deferred, not t.Cleanup: the cluster test renews the certificates
	// of admin's kubeconfig before it ends.
	defer restoreNodeAddresses(t, admin, worker, apiVIP)

	suffix := fmt.Sprintf("%d", time.Now().Unix())
	bad := createServingCSR(ctx, t, node, "e2e-serving-vip-"+suffix, worker,
		[]string{worker, "kubernetes.default.svc"}, []string{workerIP, apiVIP})
	good := createServingCSR(ctx, t, node, "e2e-serving-own-"+suffix, worker, []string{worker}, []string{workerIP})
	defer deleteCSRs(t, admin, bad, good)
	submitted := time.Now()

	kubeletCA := kubeletServingCA(ctx, t, admin)
	issued := waitIssued(ctx, t, admin, good)
	if _, err := issued.Verify(x509.VerifyOptions{Roots: kubeletCA, DNSName: worker, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the certificate of the legitimate CSR does not verify against the kubelet serving CA for %s: %v", worker, err)
	}

	if wait := csrPatience - time.Since(submitted); wait > 0 {
		time.Sleep(wait)
	}
	csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, bad, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(csr.Status.Conditions) != 0 || len(csr.Status.Certificate) != 0 {
		t.Fatalf("CSR %s for the API VIP and kubernetes.default.svc is not pending %s after it was made: conditions %+v",
			bad, csrPatience, csr.Status.Conditions)
	}
	if log := approverLog(ctx, t, admin); !strings.Contains(log, "leaving CSR "+bad+" of system:node:"+worker+" pending") {
		t.Errorf("the approver's log does not say why it left %s pending:\n%s", bad, lastLines(log, 20))
	}

	// Defence in depth: even an approval by mistake gives no certificate
	// that passes for the API server.
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "E2EMistake", Message: "approved by the e2e suite to check what the certificate is worth",
	})
	if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, bad, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mistake := waitIssued(ctx, t, admin, bad)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(adminRC.TLSClientConfig.CAData) {
		t.Fatal("auth/kubeconfig holds no CA certificate")
	}
	for _, name := range []string{apiVIP, "kubernetes.default.svc"} {
		if _, err := mistake.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
			t.Errorf("a kubelet serving certificate verifies as %s against the CA of auth/kubeconfig: a worker could impersonate the API server", name)
		}
	}
}

// adminClientConfig returns the admin client of --dir and its config.
func adminClientConfig(t *testing.T, dir string) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "auth", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.Dial = clusterDial
	return kubernetes.NewForConfigOrDie(rc), rc
}

// inventoryAddress returns the address kiln's machine inventory assigns to
// machine name.
func inventoryAddress(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(inventory.Namespace).Get(ctx, inventory.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the machine inventory: %v", err)
	}
	inv, err := inventory.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := inv.Machine(name)
	if !ok || len(m.Addresses) == 0 {
		t.Fatalf("%s is not in the machine inventory: %s", name, cm.Data[inventory.Key])
	}
	return m.Addresses[0].String()
}

// createServingCSR creates, as client (a kubelet), a kubelet serving CSR
// of node for dns and ips, and returns its name.
func createServingCSR(ctx context.Context, t *testing.T, client kubernetes.Interface, name, node string, dns, ips []string) string {
	t.Helper()
	csr := nodeCSR(t, name, node, certificatesv1.KubeletServingSignerName, certificatesv1.UsageServerAuth, dns, ips)
	if _, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the worker's kubelet credentials could not create CSR %s: %v", name, err)
	}
	return name
}

// nodeCSR is the CSR a kubelet of node makes for signer: a new P-256 key,
// the subject system:node:<node> in system:nodes, the SANs dns and ips, and
// the usages digital signature and usage.
func nodeCSR(t *testing.T, name, node, signer string, usage certificatesv1.KeyUsage, dns, ips []string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, usage},
		},
	}
}

// waitIssued waits for CSR name to be approved and issued and returns its
// certificate.
func waitIssued(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) *x509.Certificate {
	t.Helper()
	last := "not read yet"
	for {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("conditions %+v", csr.Status.Conditions)
			if block, _ := pem.Decode(csr.Status.Certificate); block != nil {
				cert, err := x509.ParseCertificate(block.Bytes)
				if err != nil {
					t.Fatalf("CSR %s: %v", name, err)
				}
				return cert
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CSR %s was not approved and issued: %s", name, last)
		case <-time.After(time.Second):
		}
	}
}

// kubeletServingCA returns the kubelet serving CA the cluster publishes.
func kubeletServingCA(ctx context.Context, t *testing.T, client kubernetes.Interface) *x509.CertPool {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, manifests.KubeletServingCAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[manifests.KubeletServingCAKey])) {
		t.Fatalf("ConfigMap %s holds no certificate", manifests.KubeletServingCAConfigMap)
	}
	return pool
}

// approverLog returns the CSR approver's log.
func approverLog(ctx context.Context, t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	pods, err := client.CoreV1().Pods("kiln-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=kiln-csr-approver"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the approver's pod: %v (%d found)", err, len(pods.Items))
	}
	var b strings.Builder
	for _, p := range pods.Items {
		raw, err := client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Errorf("log of %s: %v", p.Name, err)
		}
		b.Write(raw)
	}
	return b.String()
}

// restoreNodeAddresses removes the addresses the test injected into
// node's status, if its kubelet has not done so already.
func restoreNodeAddresses(t *testing.T, client kubernetes.Interface, node, vip string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Logf("restore the addresses of %s: %v", node, err)
		return
	}
	var keep []corev1.NodeAddress
	for _, a := range n.Status.Addresses {
		if a.Address != vip && a.Address != "kubernetes.default.svc" {
			keep = append(keep, a)
		}
	}
	if len(keep) == len(n.Status.Addresses) {
		return
	}
	n.Status.Addresses = keep
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Logf("restore the addresses of %s: %v", node, err)
	}
}
