package csrapprover

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/kiln-project/kiln/assets/manifests/inventory"
)

// Identity of kubelets in the API (their client certificates' CN and O).
const (
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"
)

// Verdict is what the approver does with a CSR.
type Verdict int

// Verdicts of Decide and DecideNodeClient.
const (
	// Ignore: not a CSR the approver handles (another signer, a node's
	// renewal of its client certificate), or already approved, denied or
	// failed.
	Ignore Verdict = iota
	// Approve: a kubelet asks for a serving certificate for its own
	// machine's name and addresses, as kiln assigned them; or a machine
	// joining with a bootstrap token asks for the client certificate of a
	// machine that token may claim.
	Approve
	// Pending: a CSR the approver handles that breaks a rule; it is left
	// for an administrator (never denied), and the reason is logged.
	Pending
)

// String names the verdict.
func (v Verdict) String() string {
	return [...]string{"ignore", "approve", "pending"}[v]
}

// MachineSource gives Decide kiln's machine inventory.
type MachineSource interface {
	// Machines returns the inventory, or why it cannot be read (then
	// every CSR is left pending).
	Machines() (*inventory.Inventory, error)
}

// Decide applies the approval rules to csr. The reason says why a CSR is
// ignored or left pending (empty for Approve). Rules, all of which must hold:
//   - the signer is kubernetes.io/kubelet-serving;
//   - the requester is system:node:<name> in group system:nodes;
//   - the request's subject is exactly CN=system:node:<name>, O=system:nodes;
//   - usages are digital signature and server auth, plus optionally key
//     encipherment, and nothing else;
//   - there is at least one DNS or IP SAN, and no e-mail or URI SAN;
//   - no SAN is on deny (nor among what DenyList always refuses);
//   - <name> is a machine of kiln's inventory (machines), every DNS SAN is
//     its name and every IP SAN one of the addresses kiln assigned to it.
//
// What the kubelet reports in its Node's status is not consulted: a node
// can write its own status.
func Decide(csr *certificatesv1.CertificateSigningRequest, machines MachineSource, deny DenyList) (Verdict, string) {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return Ignore, "signer " + csr.Spec.SignerName
	}
	if done := finished(csr); done != "" {
		return Ignore, done
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
	if err := checkUsages(csr.Spec.Usages, certificatesv1.UsageServerAuth, "kubelet serving"); err != nil {
		return Pending, err.Error()
	}
	if err := checkSANKinds(req); err != nil {
		return Pending, err.Error()
	}
	if err := deny.check(req); err != nil {
		return Pending, err.Error()
	}
	inv, err := machines.Machines()
	if err != nil {
		return Pending, fmt.Sprintf("machine inventory: %v", err)
	}
	m, ok := inv.Machine(name)
	if !ok {
		return Pending, fmt.Sprintf("node %s is not a machine of kiln's inventory (ConfigMap %s/%s)", name, inventory.Namespace, inventory.Name)
	}
	if err := checkSANs(req, m); err != nil {
		return Pending, err.Error()
	}
	return Approve, ""
}

// finished says "already approved" (denied, failed) when csr is; "" when
// it is still undecided.
func finished(csr *certificatesv1.CertificateSigningRequest) string {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return "already " + strings.ToLower(string(c.Type))
		}
	}
	return ""
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

// checkUsages requires digital signature and purpose (server or client
// auth), allows key encipherment besides, and refuses anything else; kind
// names the certificate in the message.
func checkUsages(usages []certificatesv1.KeyUsage, purpose certificatesv1.KeyUsage, kind string) error {
	has := map[certificatesv1.KeyUsage]bool{}
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, purpose:
			has[u] = true
		default:
			return fmt.Errorf("usage %q is not a %s usage", u, kind)
		}
	}
	if !has[certificatesv1.UsageDigitalSignature] || !has[purpose] {
		return fmt.Errorf("usages %v lack digital signature or %s", usages, purpose)
	}
	return nil
}

// checkSANKinds requires a DNS or IP SAN and refuses e-mail and URI SANs.
func checkSANKinds(req *x509.CertificateRequest) error {
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return fmt.Errorf("request has e-mail or URI SANs")
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return fmt.Errorf("request has no DNS or IP SAN")
	}
	return nil
}

// checkSANs checks the request's names and addresses against what kiln
// assigned to machine m: its name, its addresses.
func checkSANs(req *x509.CertificateRequest, m inventory.Machine) error {
	for _, d := range req.DNSNames {
		if d != m.Name {
			return fmt.Errorf("DNS SAN %s is not the name of machine %s", d, m.Name)
		}
	}
	for _, ip := range req.IPAddresses {
		a, _ := netip.AddrFromSlice(ip)
		if !slices.Contains(m.Addresses, a.Unmap()) {
			return fmt.Errorf("IP SAN %s is not an address kiln assigned to machine %s (%s)", ip, m.Name, joinAddrs(m.Addresses))
		}
	}
	return nil
}

// joinAddrs lists addresses for a message.
func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
