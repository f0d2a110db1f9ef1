package csrapprover

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/manifests/inventory"
)

// NodeSource tells DecideNodeClient whether a machine's Node is registered.
type NodeSource interface {
	// NodeExists reports whether Node name exists; an error means it cannot
	// tell now, and the CSR is examined again later.
	NodeExists(ctx context.Context, name string) (bool, error)
}

// ClientNodes is a NodeSource that asks the API server, one Get per CSR:
// a cache could miss a Node that registered a moment ago.
type ClientNodes struct {
	// Client reads Nodes.
	Client kubernetes.Interface
}

// NodeExists implements NodeSource.
func (c ClientNodes) NodeExists(ctx context.Context, name string) (bool, error) {
	_, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// DecideNodeClient applies the approval rules of node client CSRs made with
// a bootstrap token, the first certificate of a joining kubelet. The reason
// says why a CSR is ignored or left pending (empty for Approve); an error
// means a Node could not be read, and the CSR is to be examined again.
// Rules, all of which must hold:
//   - the signer is kubernetes.io/kube-apiserver-client-kubelet (a CSR of a
//     node, system:node:*, renews its own certificate: kube-controller-manager
//     approves that, and it is ignored here);
//   - the requester is a bootstrap token, system:bootstrap:<id> in group
//     system:bootstrappers;
//   - the request's subject is exactly CN=system:node:<name>,
//     O=system:nodes, its signature is valid, and it has no SAN;
//   - usages are digital signature and client auth, plus optionally key
//     encipherment, and nothing else;
//   - <name> is a machine of kiln's inventory (machines);
//   - if a machine of the inventory joins with token <id> (its joinTokenID,
//     recorded by `kiln scale cluster`), <name> is that machine; otherwise
//     (the install-time token) <name> is a machine without a join token;
//   - no Node <name> exists (nodes): a registered node renews with its own
//     certificate, and a token must not take over a machine that joined.
func DecideNodeClient(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, machines MachineSource, nodes NodeSource) (Verdict, string, error) {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return Ignore, "signer " + csr.Spec.SignerName, nil
	}
	if done := finished(csr); done != "" {
		return Ignore, done, nil
	}
	if strings.HasPrefix(csr.Spec.Username, NodeUserPrefix) {
		return Ignore, "a node renews its own client certificate (kube-controller-manager approves that)", nil
	}
	id, err := bootstrapRequester(csr.Spec)
	if err != nil {
		return Pending, err.Error(), nil
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return Pending, err.Error(), nil
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, NodeUserPrefix)
	if !ok || name == "" {
		return Pending, fmt.Sprintf("subject %q is not CN=%s<name>, O=%s", req.Subject.String(), NodeUserPrefix, NodesGroup), nil
	}
	if err := checkSubject(req, name); err != nil {
		return Pending, err.Error(), nil
	}
	if err := checkNoSANs(req); err != nil {
		return Pending, err.Error(), nil
	}
	if err := checkUsages(csr.Spec.Usages, certificatesv1.UsageClientAuth, "node client"); err != nil {
		return Pending, err.Error(), nil
	}
	inv, err := machines.Machines()
	if err != nil {
		return Pending, fmt.Sprintf("machine inventory: %v", err), nil
	}
	m, ok := inv.Machine(name)
	if !ok {
		return Pending, fmt.Sprintf("node %s is not a machine of kiln's inventory (ConfigMap %s/%s)", name, inventory.Namespace, inventory.Name), nil
	}
	if owner, ok := inv.JoinedWith(id); ok && owner.Name != name {
		return Pending, fmt.Sprintf("bootstrap token %s is the join token of machine %s, not of %s", id, owner.Name, name), nil
	}
	if m.JoinTokenID != "" && m.JoinTokenID != id {
		return Pending, fmt.Sprintf("machine %s joins with bootstrap token %s, not %s", name, m.JoinTokenID, id), nil
	}
	exists, err := nodes.NodeExists(ctx, name)
	if err != nil {
		return Pending, "", fmt.Errorf("read Node %s: %w", name, err)
	}
	if exists {
		return Pending, fmt.Sprintf("Node %s is registered already: its kubelet renews with its own certificate", name), nil
	}
	return Approve, "", nil
}

// bootstrapRequester returns the token ID of a CSR made with a bootstrap
// token.
func bootstrapRequester(spec certificatesv1.CertificateSigningRequestSpec) (string, error) {
	id, ok := strings.CutPrefix(spec.Username, bootstraptoken.User)
	if !ok || id == "" {
		return "", fmt.Errorf("requester %q is neither a node nor a bootstrap token", spec.Username)
	}
	if !slices.Contains(spec.Groups, bootstraptoken.Group) {
		return "", fmt.Errorf("requester %s is not in group %s", spec.Username, bootstraptoken.Group)
	}
	return id, nil
}

// checkNoSANs refuses a node client request that names anything besides
// its subject.
func checkNoSANs(req *x509.CertificateRequest) error {
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return fmt.Errorf("request has SANs: a node client certificate names nothing but its subject")
	}
	return nil
}
