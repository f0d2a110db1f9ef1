package csrapprover

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/manifests/inventory"
)

// waitFor polls cond until it holds or the test's patience ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// approved reports whether the agent approved CSR name, with the
// approval's reason (ApprovalReason or NodeClientApprovalReason).
func approved(t *testing.T, client *fake.Clientset, name, reason string) bool {
	t.Helper()
	csr, err := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return c.Reason == reason
		}
	}
	return false
}

// run starts Run on client and returns a function that stops it and
// checks it ended well.
func run(t *testing.T, client *fake.Clientset, log logrus.FieldLogger) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, client, testDeny(t), log) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}

// logged reports whether hook saw a warning containing msg.
func logged(hook *test.Hook, msg string) bool {
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

// TestRunApprovesOnlyGoodCSRs is the finding's attack: the Node of m0
// reports the API VIP and kubernetes.default.svc (a kubelet may write its
// own status), and its CSR for them stays pending, with the reason logged,
// while the CSR for its own name and address is approved.
func TestRunApprovesOnlyGoodCSRs(t *testing.T) {
	good := servingCSR(t, "good", kubeletRequest())
	attack := kubeletRequest()
	attack.ips = append(attack.ips, "10.66.0.1")
	attack.dns = append(attack.dns, "kubernetes.default.svc")
	bad := servingCSR(t, "vip", attack)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m0"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.66.0.11"}, {Type: corev1.NodeInternalIP, Address: "10.66.0.1"},
		{Type: corev1.NodeHostName, Address: "m0"}, {Type: corev1.NodeInternalDNS, Address: "kubernetes.default.svc"},
	}}}
	client := fake.NewClientset(inventoryConfigMap(t, testMachines()), node, good, bad)
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)

	stop := run(t, client, log)
	waitFor(t, "the good CSR to be approved", func() bool { return approved(t, client, "good", ApprovalReason) })
	waitFor(t, "the bad CSR to be logged", func() bool {
		return logged(hook, "leaving CSR vip of system:node:m0 pending: DNS SAN kubernetes.default.svc is never approved")
	})
	stop()
	if approved(t, client, "vip", ApprovalReason) {
		t.Error("the CSR for the API VIP and kubernetes.default.svc was approved")
	}
	csr, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "vip", metav1.GetOptions{})
	if len(csr.Status.Conditions) != 0 {
		t.Errorf("the bad CSR got conditions %v, want it left pending (never denied)", csr.Status.Conditions)
	}
	var approvals int
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "approval" {
			approvals++
		}
		if a.GetResource().Resource == "nodes" {
			t.Errorf("the approver read Nodes (%s) for serving CSRs: what a kubelet reports is not to be trusted", a.GetVerb())
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval updates, want 1", approvals)
	}
}

// TestRunApprovesWhenTheMachineIsAdded: a CSR of a machine that is not in
// the inventory waits, and is approved once kiln adds the machine.
func TestRunApprovesWhenTheMachineIsAdded(t *testing.T) {
	w1 := request{cn: "system:node:w1", o: NodesGroup, dns: []string{"w1"}, ips: []string{"10.66.0.22"}}
	csr := servingCSR(t, "early", w1)
	csr.Spec.Username = "system:node:w1"
	client := fake.NewClientset(inventoryConfigMap(t, testMachines()), csr)
	log, hook := test.NewNullLogger()
	stop := run(t, client, log)
	defer stop()
	waitFor(t, "the CSR to be left pending", func() bool {
		return logged(hook, "leaving CSR early of system:node:w1 pending: node w1 is not a machine of kiln's inventory")
	})
	if approved(t, client, "early", ApprovalReason) {
		t.Fatal("approved before the machine was in the inventory")
	}
	inv := testMachines()
	inv.Set(inventory.Machine{Name: "w1", Role: inventory.RoleWorker, Addresses: []netip.Addr{netip.MustParseAddr("10.66.0.22")}})
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(context.Background(), inventoryConfigMap(t, inv), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CSR to be approved once its machine is in the inventory", func() bool { return approved(t, client, "early", ApprovalReason) })
}
