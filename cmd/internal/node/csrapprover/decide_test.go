package csrapprover

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// request is what a kubelet puts into its serving CSR.
type request struct {
	cn, o string
	dns   []string
	ips   []string
	email string
}

// kubeletRequest is what the kubelet of node m0 (10.66.0.11) asks for.
func kubeletRequest() request {
	return request{cn: "system:node:m0", o: NodesGroup, dns: []string{"m0"}, ips: []string{"10.66.0.11"}}
}

func csrPEM(t *testing.T, r request) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: r.cn}, DNSNames: r.dns}
	if r.o != "" {
		tmpl.Subject.Organization = []string{r.o}
	}
	for _, ip := range r.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if r.email != "" {
		tmpl.EmailAddresses = []string{r.email}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// servingCSR is a kubelet serving CSR of node m0 as kube-apiserver stores it.
func servingCSR(t *testing.T, name string, r request) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM(t, r),
			SignerName: certificatesv1.KubeletServingSignerName,
			Username:   "system:node:m0",
			Groups:     []string{NodesGroup, "system:authenticated"},
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}
}

func testNode(name, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name},
		}},
	}
}

func lister(t *testing.T, nodes ...*corev1.Node) corev1listers.NodeLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return corev1listers.NewNodeLister(idx)
}

func TestDecide(t *testing.T) {
	nodes := lister(t, testNode("m0", "10.66.0.11"), testNode("w0", "10.66.0.21"))
	tests := []struct {
		name   string
		edit   func(*request)                                  // changes the request
		csr    func(*certificatesv1.CertificateSigningRequest) // changes the CSR object
		nodes  corev1listers.NodeLister
		want   Verdict
		reason string // part of the reason
	}{
		{name: "good CSR", want: Approve},
		{name: "good RSA-style usages with key encipherment", want: Approve,
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
			}},
		{name: "IP only", want: Approve, edit: func(r *request) { r.dns = nil }},
		{name: "wrong requester", want: Pending, reason: "is not CN=system:node:w0",
			csr: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "system:node:w0" }},
		{name: "requester not a node", want: Pending, reason: "is not a node",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Username = "system:serviceaccount:kube-system:x"
			}},
		{name: "requester not in system:nodes", want: Pending, reason: "not in group system:nodes",
			csr: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Groups = []string{"system:authenticated"} }},
		{name: "subject of another node", want: Pending, reason: "subject",
			edit: func(r *request) { r.cn = "system:node:w0" }},
		{name: "subject without organization", want: Pending, reason: "subject",
			edit: func(r *request) { r.o = "" }},
		{name: "foreign IP SAN", want: Pending, reason: "IP SAN 10.66.0.21 is not an address of Node m0",
			edit: func(r *request) { r.ips = append(r.ips, "10.66.0.21") }},
		{name: "extra DNS name", want: Pending, reason: "DNS SAN kubernetes.default is not an address",
			edit: func(r *request) { r.dns = append(r.dns, "kubernetes.default") }},
		{name: "e-mail SAN", want: Pending, reason: "e-mail",
			edit: func(r *request) { r.email = "a@example.com" }},
		{name: "no SAN", want: Pending, reason: "no DNS or IP SAN",
			edit: func(r *request) { r.dns, r.ips = nil, nil }},
		{name: "client usage", want: Pending, reason: "usage \"client auth\"",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
			}},
		{name: "no server auth", want: Pending, reason: "lack",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
			}},
		{name: "no Node yet", want: Pending, reason: "no Node m0", nodes: lister(t)},
		{name: "IP claimed by another Node too", want: Pending, reason: "also an address of Node w0",
			nodes: lister(t, testNode("m0", "10.66.0.11"), testNode("w0", "10.66.0.11"))},
		{name: "not PEM", want: Pending, reason: "not a PEM",
			csr: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("junk") }},
		{name: "wrong signer", want: Ignore, reason: "signer kubernetes.io/kube-apiserver-client-kubelet",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
			}},
		{name: "already approved", want: Ignore, reason: "already approved",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
			}},
		{name: "already denied", want: Ignore, reason: "already denied",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := kubeletRequest()
			if tt.edit != nil {
				tt.edit(&r)
			}
			csr := servingCSR(t, "csr-1", r)
			if tt.csr != nil {
				tt.csr(csr)
			}
			nl := nodes
			if tt.nodes != nil {
				nl = tt.nodes
			}
			got, reason := Decide(csr, nl)
			if got != tt.want {
				t.Fatalf("verdict = %v (%s), want %v", got, reason, tt.want)
			}
			if tt.want == Approve && reason != "" {
				t.Errorf("reason of an approval = %q, want none", reason)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason = %q, want it to contain %q", reason, tt.reason)
			}
		})
	}
}

func TestDecideRejectsForgedSignature(t *testing.T) {
	csr := servingCSR(t, "csr-1", kubeletRequest())
	block, _ := pem.Decode(csr.Spec.Request)
	block.Bytes[len(block.Bytes)-3] ^= 0xff // inside the signature
	csr.Spec.Request = pem.EncodeToMemory(block)
	if got, reason := Decide(csr, lister(t, testNode("m0", "10.66.0.11"))); got != Pending {
		t.Fatalf("verdict = %v (%s), want pending", got, reason)
	}
}
