package csrapprover

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kiln-project/kiln/assets/manifests/inventory"
)

// Bootstrap tokens of the tests: the install-time token, and the join
// token of w1, which `kiln scale cluster` added.
const (
	installToken = "a1b2c3"
	w1Token      = "abc123"
)

// joinMachines is testMachines with w1, added by a scale with w1Token.
func joinMachines() *inventory.Inventory {
	inv := testMachines()
	inv.Set(inventory.Machine{Name: "w1", Role: inventory.RoleWorker,
		Addresses: []netip.Addr{netip.MustParseAddr("10.66.0.22")}, JoinTokenID: w1Token})
	return inv
}

// clientCSR is a node client CSR for node, made with bootstrap token id,
// as kube-apiserver stores it.
func clientCSR(t *testing.T, name, id, node string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM(t, request{cn: NodeUserPrefix + node, o: NodesGroup}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Username:   "system:bootstrap:" + id,
			Groups:     []string{"system:bootstrappers", "system:bootstrappers:kiln:default-node-token", "system:authenticated"},
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

// registered is a cluster whose Nodes are names.
func registered(names ...string) ClientNodes {
	var objs []runtime.Object
	for _, n := range names {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return ClientNodes{Client: fake.NewClientset(objs...)}
}

func TestDecideNodeClient(t *testing.T) {
	apiDown := fake.NewClientset()
	apiDown.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is leaderless")
	})
	tests := []struct {
		name     string
		id, node string                                          // the token and the node it claims
		edit     func(*request)                                  // changes the request
		csr      func(*certificatesv1.CertificateSigningRequest) // changes the CSR object
		machines MachineSource                                   // the inventory; joinMachines() when nil
		nodes    NodeSource                                      // the Nodes; m0 when nil
		want     Verdict
		reason   string // part of the reason
		err      string // part of the error
	}{
		// The legitimate cases.
		{name: "install-time token, a worker of the install", id: installToken, node: "w0", want: Approve},
		{name: "install-time token, the masters during bootstrap", id: installToken, node: "m0", nodes: registered(), want: Approve},
		{name: "day-2 token, its own machine", id: w1Token, node: "w1", want: Approve},
		{name: "RSA-style usages with key encipherment", id: w1Token, node: "w1", want: Approve,
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
			}},

		// Which names a token may claim.
		{name: "a registered master", id: installToken, node: "m0", want: Pending,
			reason: "Node m0 is registered already: its kubelet renews with its own certificate"},
		{name: "day-2 token, a registered master", id: w1Token, node: "m0", want: Pending,
			reason: "bootstrap token abc123 is the join token of machine w1, not of m0"},
		{name: "day-2 token, another machine not registered", id: w1Token, node: "w0", want: Pending,
			reason: "bootstrap token abc123 is the join token of machine w1, not of w0"},
		{name: "install-time token, a machine a scale added", id: installToken, node: "w1", want: Pending,
			reason: "machine w1 joins with bootstrap token abc123, not a1b2c3"},
		{name: "a token of no machine, a machine a scale added", id: "zzz999", node: "w1", want: Pending,
			reason: "machine w1 joins with bootstrap token abc123, not zzz999"},
		{name: "day-2 token, its own machine registered already", id: w1Token, node: "w1", nodes: registered("w1"), want: Pending,
			reason: "Node w1 is registered already"},
		{name: "not in the inventory", id: installToken, node: "x9", want: Pending,
			reason: "node x9 is not a machine of kiln's inventory (ConfigMap kube-system/kiln-machines)"},
		{name: "no inventory", id: installToken, node: "w0", machines: source(t), want: Pending,
			reason: "machine inventory: no ConfigMap kube-system/kiln-machines"},
		{name: "the Node cannot be read", id: installToken, node: "w0", nodes: ClientNodes{Client: apiDown}, want: Pending,
			err: "read Node w0: etcd is leaderless"},

		// Who asks.
		{name: "requester not a bootstrap token", id: installToken, node: "w0", want: Pending,
			reason: `requester "system:serviceaccount:kube-system:x" is neither a node nor a bootstrap token`,
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Username = "system:serviceaccount:kube-system:x"
			}},
		{name: "bootstrap user outside system:bootstrappers", id: installToken, node: "w0", want: Pending,
			reason: "requester system:bootstrap:a1b2c3 is not in group system:bootstrappers",
			csr:    func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Groups = []string{"system:authenticated"} }},
		{name: "a node's renewal", id: installToken, node: "m0", want: Ignore, reason: "renews its own client certificate",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Username, c.Spec.Groups = "system:node:m0", []string{NodesGroup, "system:authenticated"}
			}},

		// What it asks for.
		{name: "subject without organization", id: installToken, node: "w0", want: Pending, reason: `subject "CN=system:node:w0" is not`,
			edit: func(r *request) { r.o = "" }},
		{name: "subject in system:masters", id: installToken, node: "w0", want: Pending, reason: "subject",
			edit: func(r *request) { r.o = "system:masters" }},
		{name: "subject not a node", id: installToken, node: "w0", want: Pending, reason: `subject "CN=admin,O=system:nodes" is not CN=system:node:<name>`,
			edit: func(r *request) { r.cn = "admin" }},
		{name: "a DNS SAN", id: installToken, node: "w0", want: Pending, reason: "request has SANs",
			edit: func(r *request) { r.dns = []string{"w0"} }},
		{name: "an IP SAN", id: installToken, node: "w0", want: Pending, reason: "request has SANs",
			edit: func(r *request) { r.ips = []string{"10.66.0.21"} }},
		{name: "an e-mail SAN", id: installToken, node: "w0", want: Pending, reason: "request has SANs",
			edit: func(r *request) { r.email = "a@example.com" }},
		{name: "server usage", id: installToken, node: "w0", want: Pending, reason: `usage "server auth" is not a node client usage`,
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
			}},
		{name: "no client auth", id: installToken, node: "w0", want: Pending, reason: "lack digital signature or client auth",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
			}},
		{name: "not PEM", id: installToken, node: "w0", want: Pending, reason: "not a PEM",
			csr: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("junk") }},

		{name: "already approved", id: installToken, node: "w0", want: Ignore, reason: "already approved",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
			}},
		{name: "a serving CSR", id: installToken, node: "w0", want: Ignore, reason: "signer kubernetes.io/kubelet-serving",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.SignerName = certificatesv1.KubeletServingSignerName
			}},
		{name: "another client signer", id: installToken, node: "w0", want: Ignore, reason: "signer kubernetes.io/kube-apiserver-client",
			csr: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
			}},
	}
	machines := source(t, inventoryConfigMap(t, joinMachines()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{cn: NodeUserPrefix + tt.node, o: NodesGroup}
			if tt.edit != nil {
				tt.edit(&r)
			}
			csr := clientCSR(t, "csr-1", tt.id, tt.node)
			csr.Spec.Request = csrPEM(t, r)
			if tt.csr != nil {
				tt.csr(csr)
			}
			ms, ns := machines, tt.nodes
			if tt.machines != nil {
				ms = tt.machines
			}
			if ns == nil {
				ns = registered("m0")
			}
			got, reason, err := DecideNodeClient(context.Background(), csr, ms, ns)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
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

func TestDecideNodeClientRejectsForgedSignature(t *testing.T) {
	csr := clientCSR(t, "csr-1", installToken, "w0")
	csr.Spec.Request = forge(t, csr.Spec.Request)
	got, reason, err := DecideNodeClient(context.Background(), csr, source(t, inventoryConfigMap(t, joinMachines())), registered())
	if err != nil || got != Pending || !strings.Contains(reason, "request signature") {
		t.Fatalf("verdict = %v (%s), %v; want pending for the signature", got, reason, err)
	}
}

// TestRunNodeClientDuringBootstrap is the bootstrap machine's approver: it
// starts before bootkube applied the inventory and waits for it, then
// approves the first master's client certificate; a worker holding the
// same install-time token asks for the client certificate of the master
// that registered meanwhile, and that stays pending, with the reason
// logged.
func TestRunNodeClientDuringBootstrap(t *testing.T) {
	m1 := clientCSR(t, "m1-client", installToken, "m1")
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m0"}}, m1)
	log, hook := test.NewNullLogger()
	stop := run(t, client, log)
	defer stop()
	waitFor(t, "the CSR to wait for the inventory", func() bool {
		return logged(hook, "leaving CSR m1-client of system:bootstrap:a1b2c3 pending: machine inventory: no ConfigMap kube-system/kiln-machines")
	})
	inv := joinMachines()
	inv.Set(inventory.Machine{Name: "m1", Role: inventory.RoleMaster, Addresses: []netip.Addr{netip.MustParseAddr("10.66.0.12")}})
	if _, err := client.CoreV1().ConfigMaps(inventory.Namespace).Create(context.Background(), inventoryConfigMap(t, inv), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "m1's client certificate to be approved once bootkube applied the inventory", func() bool {
		return approved(t, client, "m1-client", NodeClientApprovalReason)
	})

	takeover := clientCSR(t, "m0-takeover", installToken, "m0")
	if _, err := client.CertificatesV1().CertificateSigningRequests().Create(context.Background(), takeover, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the take-over to be logged", func() bool {
		return logged(hook, "leaving CSR m0-takeover of system:bootstrap:a1b2c3 pending: Node m0 is registered already")
	})
	csr, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "m0-takeover", metav1.GetOptions{})
	if len(csr.Status.Conditions) != 0 {
		t.Errorf("the take-over got conditions %v, want it left pending (never denied)", csr.Status.Conditions)
	}
}

// TestRunToleratesAnotherApprover: the bootstrap machine's approver and
// the Deployment both approve the same CSR. The one that loses gets a
// conflict (the fake answers like the API server: an approval of a copy
// older than the stored object conflicts), which is a debug line, neither
// an error nor a warning, and the CSR keeps the one approval it got.
func TestRunToleratesAnotherApprover(t *testing.T) {
	csr := clientCSR(t, "w0-client", installToken, "w0")
	client := fake.NewClientset(inventoryConfigMap(t, joinMachines()), csr)
	csrs := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	var attempts atomic.Int32
	client.PrependReactor("update", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "approval" {
			return false, nil, nil
		}
		attempts.Add(1)
		obj, err := client.Tracker().Get(csrs, "", "w0-client")
		if err != nil {
			t.Error(err)
			return true, nil, err
		}
		cur := obj.(*certificatesv1.CertificateSigningRequest)
		if len(cur.Status.Conditions) == 0 { // the other approver is first
			cur = cur.DeepCopy()
			cur.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
				{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "OtherApprover"}}
			if err := client.Tracker().Update(csrs, cur, ""); err != nil {
				t.Error(err)
			}
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"},
			cur.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	})
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	stop := run(t, client, log)
	waitFor(t, "the conflict to be noted", func() bool {
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.DebugLevel && strings.Contains(e.Message, "CSR w0-client changed while being approved") {
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond) // a retry would come within milliseconds
	stop()
	got, err := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "w0-client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Conditions; len(c) != 1 || c[0].Reason != "OtherApprover" {
		t.Errorf("conditions %+v, want the other approver's approval alone", c)
	}
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel || strings.Contains(e.Message, "approved CSR") {
			t.Errorf("logged %s: %s", e.Level, e.Message)
		}
	}
	if n := attempts.Load(); n < 1 {
		t.Errorf("%d approval attempts, want at least 1", n)
	}
}
