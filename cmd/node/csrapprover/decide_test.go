package csrapprover

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/netip"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kiln-project/kiln/assets/manifests/inventory"
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

// testMachines is the inventory of the tests: master m0 and worker w0.
func testMachines() *inventory.Inventory {
	return &inventory.Inventory{Machines: []inventory.Machine{
		{Name: "m0", Role: inventory.RoleMaster, Addresses: []netip.Addr{netip.MustParseAddr("10.66.0.11")}},
		{Name: "w0", Role: inventory.RoleWorker, Addresses: []netip.Addr{netip.MustParseAddr("10.66.0.21")}},
	}}
}

// inventoryConfigMap is inv as kiln publishes it.
func inventoryConfigMap(t *testing.T, inv *inventory.Inventory) *corev1.ConfigMap {
	t.Helper()
	cm, err := inv.ConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// source is a MachineSource over a fake ConfigMap lister holding cms.
func source(t *testing.T, cms ...*corev1.ConfigMap) MachineSource {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, cm := range cms {
		if err := idx.Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	return ListerSource{Lister: corev1listers.NewConfigMapLister(idx)}
}

// testDeny is what kiln renders for cluster demo.example.test with API VIP
// 10.66.0.1 on the default networks.
func testDeny(t *testing.T) DenyList {
	t.Helper()
	d, err := NewDenyList([]string{"api.demo.example.test", "api-int.demo.example.test"}, []string{"cluster.local"},
		[]string{"10.66.0.1"}, []string{"172.30.0.0/16", "10.128.0.0/14"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecide(t *testing.T) {
	withIP := func(ip string) func(*request) { return func(r *request) { r.ips = append(r.ips, ip) } }
	withDNS := func(n string) func(*request) { return func(r *request) { r.dns = append(r.dns, n) } }
	// vipInInventory is an inventory that wrongly gives m0 the API VIP.
	vipInInventory := testMachines()
	vipInInventory.Machines[0].Addresses = append(vipInInventory.Machines[0].Addresses, netip.MustParseAddr("10.66.0.1"))
	tests := []struct {
		name     string
		edit     func(*request)                                  // changes the request
		csr      func(*certificatesv1.CertificateSigningRequest) // changes the CSR object
		machines MachineSource                                   // the inventory; testMachines() when nil
		want     Verdict
		reason   string // part of the reason
	}{
		{name: "good CSR", want: Approve},
		{name: "good RSA-style usages with key encipherment", want: Approve,
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
			}},
		{name: "IP only", want: Approve, edit: func(r *request) { r.dns = nil }},
		{name: "name only", want: Approve, edit: func(r *request) { r.ips = nil }},
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

		// Only what kiln assigned: Node status is not consulted.
		{name: "another machine's IP", want: Pending, reason: "IP SAN 10.66.0.21 is not an address kiln assigned to machine m0 (10.66.0.11)",
			edit: withIP("10.66.0.21")},
		{name: "an unassigned IP of the machine network", want: Pending, reason: "IP SAN 10.66.0.99 is not an address kiln assigned",
			edit: withIP("10.66.0.99")},
		{name: "another machine's name", want: Pending, reason: "DNS SAN w0 is not the name of machine m0",
			edit: withDNS("w0")},
		{name: "a name of the machine's own domain", want: Pending, reason: "DNS SAN m0.example.test is not the name of machine m0",
			edit: withDNS("m0.example.test")},
		{name: "not in the inventory", want: Pending, reason: "node x9 is not a machine of kiln's inventory (ConfigMap kube-system/kiln-machines)",
			edit: func(r *request) { r.cn, r.dns, r.ips = "system:node:x9", []string{"x9"}, []string{"10.66.0.29"} },
			csr:  func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "system:node:x9" }},
		{name: "no inventory", want: Pending, reason: "machine inventory: no ConfigMap kube-system/kiln-machines",
			machines: source(t)},
		{name: "an invalid inventory", want: Pending, reason: "machine inventory: ConfigMap kube-system/kiln-machines: machines.json",
			machines: source(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kiln-machines"},
				Data: map[string]string{"machines.json": `{"machines":[{"name":"m0","role":"master","addresses":["10.66.0.11"]},{"name":"m0","role":"master","addresses":["10.66.0.12"]}]}`}})},

		// Never approved, whatever the inventory says.
		{name: "the API VIP", want: Pending, reason: "IP SAN 10.66.0.1 is never approved: the API's address (--deny-ip)",
			edit: withIP("10.66.0.1")},
		{name: "the API VIP in the inventory", want: Pending, reason: "IP SAN 10.66.0.1 is never approved",
			edit: withIP("10.66.0.1"), machines: source(t, inventoryConfigMap(t, vipInInventory))},
		{name: "the first Service IP", want: Pending, reason: "IP SAN 172.30.0.1 is never approved: in 172.30.0.0/16 (--deny-cidr)",
			edit: withIP("172.30.0.1")},
		{name: "a pod IP", want: Pending, reason: "in 10.128.0.0/14", edit: withIP("10.129.3.4")},
		{name: "loopback", want: Pending, reason: "loopback", edit: withIP("127.0.0.1")},
		{name: "IPv6 loopback", want: Pending, reason: "loopback", edit: withIP("::1")},
		{name: "link-local", want: Pending, reason: "link-local", edit: withIP("169.254.169.254")},
		{name: "unspecified", want: Pending, reason: "unspecified", edit: withIP("0.0.0.0")},
		{name: "kubernetes.default.svc", want: Pending, reason: "DNS SAN kubernetes.default.svc is never approved: an in-cluster name of the API",
			edit: withDNS("kubernetes.default.svc")},
		{name: "kubernetes", want: Pending, reason: "in-cluster name", edit: withDNS("kubernetes")},
		{name: "kubernetes.default", want: Pending, reason: "in-cluster name", edit: withDNS("Kubernetes.Default")},
		{name: "kubernetes.default.svc.cluster.local", want: Pending, reason: "in-cluster name", edit: withDNS("kubernetes.default.svc.cluster.local")},
		{name: "a Service name", want: Pending, reason: "a Service name", edit: withDNS("metrics-server.kube-system.svc")},
		{name: "the cluster domain", want: Pending, reason: "in the cluster's domain cluster.local", edit: withDNS("m0.cluster.local")},
		{name: "api-int", want: Pending, reason: "DNS SAN api-int.demo.example.test is never approved: a name of the API (--deny-name)",
			edit: withDNS("api-int.demo.example.test")},
		{name: "api, absolute", want: Pending, reason: "a name of the API", edit: withDNS("api.demo.example.test.")},
		{name: "wildcard", want: Pending, reason: "a wildcard", edit: withDNS("*.apps.demo.example.test")},
		{name: "localhost", want: Pending, reason: "localhost", edit: withDNS("localhost")},

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
	machines := source(t, inventoryConfigMap(t, testMachines()))
	deny := testDeny(t)
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
			ms := machines
			if tt.machines != nil {
				ms = tt.machines
			}
			got, reason := Decide(csr, ms, deny)
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

func TestNewDenyList(t *testing.T) {
	d, err := NewDenyList([]string{"API.Example."}, []string{".cluster.local."}, []string{"10.66.0.1", "::ffff:10.66.0.2"}, []string{"172.30.0.7/16"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Names[0] != "api.example" || d.Domains[0] != "cluster.local" || d.Addrs[1] != netip.MustParseAddr("10.66.0.2") ||
		d.Networks[0] != netip.MustParsePrefix("172.30.0.0/16") {
		t.Errorf("deny list = %+v", d)
	}
	_, err = NewDenyList(nil, nil, []string{"10.66.0.300"}, []string{"172.30.0.0", "x"})
	for _, want := range []string{`--deny-ip "10.66.0.300"`, `--deny-cidr "172.30.0.0"`, `--deny-cidr "x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
}

// forge returns the PEM request raw with a byte of its signature changed.
func forge(t *testing.T, raw []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatal("not PEM")
	}
	block.Bytes[len(block.Bytes)-3] ^= 0xff // inside the signature
	return pem.EncodeToMemory(block)
}

func TestDecideRejectsForgedSignature(t *testing.T) {
	csr := servingCSR(t, "csr-1", kubeletRequest())
	csr.Spec.Request = forge(t, csr.Spec.Request)
	if got, reason := Decide(csr, source(t, inventoryConfigMap(t, testMachines())), testDeny(t)); got != Pending {
		t.Fatalf("verdict = %v (%s), want pending", got, reason)
	}
}
