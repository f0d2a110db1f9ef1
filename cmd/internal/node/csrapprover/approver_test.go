package csrapprover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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

func approved(t *testing.T, client *fake.Clientset, name string) bool {
	t.Helper()
	csr, err := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return c.Reason == ApprovalReason
		}
	}
	return false
}

func TestRunApprovesOnlyGoodCSRs(t *testing.T) {
	good := servingCSR(t, "good", kubeletRequest())
	foreign := kubeletRequest()
	foreign.ips = append(foreign.ips, "10.66.0.21")
	bad := servingCSR(t, "foreign-ip", foreign)
	client := fake.NewClientset(testNode("m0", "10.66.0.11"), testNode("w0", "10.66.0.21"), good, bad)
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, client, log) }()
	waitFor(t, "the good CSR to be approved", func() bool { return approved(t, client, "good") })
	waitFor(t, "the foreign CSR to be logged", func() bool {
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "leaving CSR foreign-ip of system:node:m0 pending: IP SAN 10.66.0.21") {
				return true
			}
		}
		return false
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if approved(t, client, "foreign-ip") {
		t.Error("the CSR with another node's IP was approved")
	}
	csr, _ := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "foreign-ip", metav1.GetOptions{})
	if len(csr.Status.Conditions) != 0 {
		t.Errorf("the bad CSR got conditions %v, want it left pending (never denied)", csr.Status.Conditions)
	}
	var approvals int
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "approval" {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval updates, want 1", approvals)
	}
}

func TestRunApprovesWhenTheNodeAppears(t *testing.T) {
	client := fake.NewClientset(servingCSR(t, "early", kubeletRequest()))
	log, _ := test.NewNullLogger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, client, log) }()
	time.Sleep(200 * time.Millisecond)
	if approved(t, client, "early") {
		t.Fatal("approved before the Node existed")
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, testNode("m0", "10.66.0.11"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CSR to be approved once its Node exists", func() bool { return approved(t, client, "early") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
