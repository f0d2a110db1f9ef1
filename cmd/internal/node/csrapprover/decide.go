package csrapprover

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Identity of kubelets in the API (their client certificates' CN and O).
const (
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"
)

// Verdict is what the approver does with a CSR.
type Verdict int

// Verdicts of Decide.
const (
	// Ignore: not a kubelet serving CSR, or already approved, denied or failed.
	Ignore Verdict = iota
	// Approve: a kubelet asks for a serving certificate for its own Node's
	// name and addresses.
	Approve
	// Pending: a kubelet serving CSR that breaks a rule; it is left for an
	// administrator (never denied), and the reason is logged.
	Pending
)

// String names the verdict.
func (v Verdict) String() string {
	return [...]string{"ignore", "approve", "pending"}[v]
}

// Decide applies the approval rules to csr. The reason says why a CSR is
// ignored or left pending (empty for Approve). Rules, all of which must hold:
//   - the signer is kubernetes.io/kubelet-serving;
//   - the requester is system:node:<name> in group system:nodes;
//   - the request's subject is exactly CN=system:node:<name>, O=system:nodes;
//   - usages are digital signature and server auth, plus optionally key
//     encipherment, and nothing else;
//   - Node <name> exists, every DNS SAN is one of its Hostname/InternalDNS/
//     ExternalDNS addresses and every IP SAN one of its InternalIP/ExternalIP
//     addresses that no other Node reports; there is at least one SAN, and
//     no e-mail or URI SAN.
func Decide(csr *certificatesv1.CertificateSigningRequest, nodes corev1listers.NodeLister) (Verdict, string) {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return Ignore, "signer " + csr.Spec.SignerName
	}
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return Ignore, "already " + strings.ToLower(string(c.Type))
		}
	}
	name, err := requester(csr.Spec)
	if err != nil {
		return Pending, err.Error()
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return Pending, err.Error()
	}
	if err := checkSubject(req, name); err != nil {
		return Pending, err.Error()
	}
	if err := checkUsages(csr.Spec.Usages); err != nil {
		return Pending, err.Error()
	}
	node, err := nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return Pending, fmt.Sprintf("no Node %s", name)
	}
	if err != nil {
		return Pending, fmt.Sprintf("Node %s: %v", name, err)
	}
	others, err := nodes.List(labels.Everything())
	if err != nil {
		return Pending, fmt.Sprintf("list Nodes: %v", err)
	}
	if err := checkSANs(req, node, others); err != nil {
		return Pending, err.Error()
	}
	return Approve, ""
}

// requester returns the node name of a CSR made by a kubelet.
func requester(spec certificatesv1.CertificateSigningRequestSpec) (string, error) {
	name, ok := strings.CutPrefix(spec.Username, NodeUserPrefix)
	if !ok || name == "" {
		return "", fmt.Errorf("requester %q is not a node", spec.Username)
	}
	if !slices.Contains(spec.Groups, NodesGroup) {
		return "", fmt.Errorf("requester %s is not in group %s", spec.Username, NodesGroup)
	}
	return name, nil
}

func parseRequest(raw []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("request signature: %w", err)
	}
	return req, nil
}

func checkSubject(req *x509.CertificateRequest, name string) error {
	s := req.Subject
	if s.CommonName != NodeUserPrefix+name || !slices.Equal(s.Organization, []string{NodesGroup}) ||
		len(s.OrganizationalUnit)+len(s.Country)+len(s.Province)+len(s.Locality)+len(s.StreetAddress)+len(s.PostalCode) > 0 ||
		s.SerialNumber != "" || len(s.ExtraNames) > 0 {
		return fmt.Errorf("subject %q is not CN=%s%s, O=%s", s.String(), NodeUserPrefix, name, NodesGroup)
	}
	return nil
}

func checkUsages(usages []certificatesv1.KeyUsage) error {
	has := map[certificatesv1.KeyUsage]bool{}
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth:
			has[u] = true
		default:
			return fmt.Errorf("usage %q is not a kubelet serving usage", u)
		}
	}
	if !has[certificatesv1.UsageDigitalSignature] || !has[certificatesv1.UsageServerAuth] {
		return fmt.Errorf("usages %v lack digital signature or server auth", usages)
	}
	return nil
}

// checkSANs checks the request's names and addresses against node's own.
func checkSANs(req *x509.CertificateRequest, node *corev1.Node, all []*corev1.Node) error {
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return fmt.Errorf("request has e-mail or URI SANs")
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return fmt.Errorf("request has no DNS or IP SAN")
	}
	names, ips := addresses(node)
	for _, d := range req.DNSNames {
		if !slices.Contains(names, d) {
			return fmt.Errorf("DNS SAN %s is not an address of Node %s (%s)", d, node.Name, strings.Join(names, ", "))
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return fmt.Errorf("IP SAN %s is not an address of Node %s", ip, node.Name)
		}
		for _, o := range all {
			if _, oips := addresses(o); o.Name != node.Name && slices.ContainsFunc(oips, ip.Equal) {
				return fmt.Errorf("IP SAN %s is also an address of Node %s", ip, o.Name)
			}
		}
	}
	return nil
}

// addresses returns a Node's host names and IP addresses from its status.
func addresses(n *corev1.Node) (names []string, ips []net.IP) {
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	return names, ips
}
