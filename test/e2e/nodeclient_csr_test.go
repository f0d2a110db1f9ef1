package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
)

// joinNodeLabel is the label kiln scale cluster puts on a join token's
// Secret (scale.JoinLabel, which the e2e suite cannot import).
const joinNodeLabel = "kiln.dev/join-node"

// assertNodeClientCSRClaims is issue 20's second finding replayed on a
// running cluster (--dir dir, infra ID infraID): a bootstrap token may get
// the client certificate of no machine but one it may claim. The
// install-time token is deleted by then, so the test mints a token through
// the admin client the way `kiln scale cluster` does (labelled for
// <infraID>-worker-9, which it never enrolls in the machine inventory), and
// with it asks for the client certificates of system:node:<infraID>-master-0
// (a registered master: the take-over the finding is about) and of
// system:node:<infraID>-worker-9 (not in the inventory). Both CSRs must
// still be pending after csrPatience, with the approver's reasons in its
// log. The token's Secret and both CSRs are deleted afterwards.
//
// Call it from testCluster once the cluster is installed, e.g. after
// assertUserManifest, next to assertServingCSRApproval.
func assertNodeClientCSRClaims(t *testing.T, dir, infraID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, adminRC := adminClientConfig(t, dir)
	master, unknown := infraID+"-master-0", infraID+"-worker-9"
	if _, err := admin.CoreV1().Nodes().Get(ctx, master, metav1.GetOptions{}); err != nil {
		t.Fatalf("Node %s: %v (the test needs a registered master)", master, err)
	}

	// A join token, as kiln scale cluster makes one.
	tok, err := bootstraptoken.New(time.Now().Add(10 * time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	secret := tok.Secret()
	secret.Labels = map[string]string{joinNodeLabel: unknown}
	secret.Data["description"] = []byte("kiln e2e: a join token no machine of the inventory records")
	secrets := admin.CoreV1().Secrets(bootstraptoken.SecretNamespace)
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the token's Secret: %v", err)
	}
	// Deferred, not t.Cleanup: the cluster test renews the certificates
	// of admin's kubeconfig before it ends.
	defer func() {
		if err := secrets.Delete(context.Background(), secret.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Secret %s: %v", secret.Name, err)
		}
	}()
	holder := kubernetes.NewForConfigOrDie(&rest.Config{
		Host:            adminRC.Host,
		BearerToken:     tok.Token(),
		TLSClientConfig: rest.TLSClientConfig{CAData: adminRC.TLSClientConfig.CAData},
	})

	suffix := fmt.Sprintf("%d", time.Now().Unix())
	takeover, stranger := "e2e-client-master-"+suffix, "e2e-client-unknown-"+suffix
	defer deleteCSRs(t, admin, takeover, stranger)
	createNodeClientCSR(ctx, t, holder, takeover, master)
	createNodeClientCSR(ctx, t, holder, stranger, unknown)
	submitted := time.Now()
	time.Sleep(time.Until(submitted.Add(csrPatience)))

	requester := bootstraptoken.User + tok.TokenID
	for _, name := range []string{takeover, stranger} {
		csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if csr.Spec.Username != requester {
			t.Errorf("CSR %s was made by %s, want the token's user %s", name, csr.Spec.Username, requester)
		}
		if len(csr.Status.Conditions) != 0 || len(csr.Status.Certificate) != 0 {
			t.Errorf("CSR %s of a bootstrap token is not pending %s after it was made: conditions %+v, %d bytes of certificate",
				name, csrPatience, csr.Status.Conditions, len(csr.Status.Certificate))
		}
	}
	log := approverLog(ctx, t, admin)
	for _, want := range []string{
		"leaving CSR " + takeover + " of " + requester + " pending: Node " + master + " is registered already",
		"leaving CSR " + stranger + " of " + requester + " pending: node " + unknown + " is not a machine of kiln's inventory",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the approver's log lacks %q:\n%s", want, lastLines(log, 20))
		}
	}
}

// deleteCSRs deletes the CSRs names through admin, those that exist.
func deleteCSRs(t *testing.T, admin kubernetes.Interface, names ...string) {
	for _, name := range names {
		err := admin.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CSR %s: %v", name, err)
		}
	}
}

// createNodeClientCSR creates, as client (a bootstrap token holder), the
// node client CSR name for node, as a joining kubelet makes one. The API
// server may take a moment to accept a token whose Secret is new:
// creation is retried while it answers Unauthorized.
func createNodeClientCSR(ctx context.Context, t *testing.T, client kubernetes.Interface, name, node string) {
	t.Helper()
	csr := nodeCSR(t, name, node, certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.UsageClientAuth, nil, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsUnauthorized(err) || time.Now().After(deadline) {
			t.Fatalf("the bootstrap token could not create CSR %s: %v", name, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("create CSR %s: %v", name, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
