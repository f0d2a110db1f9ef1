package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// defaultKubeletPort is the kubelet's port when a Node does not report it.
const defaultKubeletPort = 10250

// nodeUserPrefix is the CN of a kubelet's certificates before its node name.
const nodeUserPrefix = "system:node:"

// ServedPort is a port where a master serves a certificate kiln renews.
type ServedPort struct {
	Port int
	// What names the certificate in the table.
	What string
}

// MasterPorts are the ports whose certificates FromCluster reads on every
// master: what `kiln certs renew` and the masters' own renewal renew.
func MasterPorts() []ServedPort {
	return []ServedPort{
		{6443, "kube-apiserver serving"},
		{2379, "etcd serving"},
		{2380, "etcd peer"},
		{22623, "machine-config server serving"},
	}
}

// FromCluster returns the kubelet certificates of every Node, in name order:
//   - "node/<name> kubelet serving": the certificate the kubelet really serves,
//     read by a TLS handshake with the Node's InternalIP and kubelet port;
//     when that fails, the newest issued kubernetes.io/kubelet-serving CSR
//     for the node ("... (CSR <name>)"), else an entry with the error;
//   - "node/<name> kubelet client (CSR <name>)": the newest issued client
//     certificate, when its CSR still exists (kube-controller-manager deletes
//     issued CSRs after an hour);
//   - on a master (label handover.ControlPlaneLabel), "node/<name> <what>
//     (:<port>)" for each of masterPorts: the certificate served there,
//     which the masters' automatic renewal may have renewed since --dir's
//     copy was issued.
//
// Only listing Nodes is an error; dial and CSR problems become entries.
func FromCluster(ctx context.Context, client kubernetes.Interface, dial netroute.Dialer, timeout time.Duration, masterPorts []ServedPort) ([]Entry, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	issued, csrErr := issuedCerts(ctx, client)
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	var out []Entry
	for i := range nodes.Items {
		n := &nodes.Items[i]
		name := "node/" + n.Name + " kubelet serving"
		served, err := servedCert(ctx, n, dial, timeout)
		switch fromCSR := issued[signerNode{certificatesv1.KubeletServingSignerName, n.Name}]; {
		case err == nil:
			out = append(out, Entry{Name: name, Cert: served})
		case fromCSR.cert != nil:
			out = append(out, Entry{Name: name + " (CSR " + fromCSR.csr + ")", Cert: fromCSR.cert})
		case csrErr != nil:
			out = append(out, Entry{Name: name, Err: fmt.Errorf("%v; %v", err, csrErr)})
		default:
			out = append(out, Entry{Name: name, Err: err})
		}
		if c := issued[signerNode{certificatesv1.KubeAPIServerClientKubeletSignerName, n.Name}]; c.cert != nil {
			out = append(out, Entry{Name: "node/" + n.Name + " kubelet client (CSR " + c.csr + ")", Cert: c.cert})
		}
		if _, master := n.Labels[handover.ControlPlaneLabel]; !master {
			continue
		}
		ip := internalIP(n)
		for _, p := range masterPorts {
			e := Entry{Name: fmt.Sprintf("node/%s %s (:%d)", n.Name, p.What, p.Port)}
			if ip == "" {
				e.Err = fmt.Errorf("Node %s has no InternalIP", n.Name)
			} else {
				e.Cert, e.Err = DialCert(ctx, dial, net.JoinHostPort(ip, strconv.Itoa(p.Port)), timeout)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// internalIP returns n's first InternalIP, "" without one.
func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// signerNode keys issued certificates by signer and node name.
type signerNode struct{ signer, node string }

// csrCert is a certificate issued through a CSR.
type csrCert struct {
	csr  string
	cert *x509.Certificate
}

// issuedCerts returns the newest certificate issued to each node per
// kubelet signer, by the certificate's CN (a kubelet's first client CSR is
// made by its bootstrap token, not by the node).
func issuedCerts(ctx context.Context, client kubernetes.Interface) (map[signerNode]csrCert, error) {
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list CSRs: %w", err)
	}
	out := map[signerNode]csrCert{}
	for _, csr := range csrs.Items {
		certs := pemCerts(csr.Status.Certificate)
		if len(certs) == 0 {
			continue
		}
		c := certs[0]
		node, ok := strings.CutPrefix(c.Subject.CommonName, nodeUserPrefix)
		if !ok || node == "" {
			continue
		}
		k := signerNode{csr.Spec.SignerName, node}
		if old := out[k]; old.cert == nil || c.NotAfter.After(old.cert.NotAfter) {
			out[k] = csrCert{csr.Name, c}
		}
	}
	return out, nil
}

// servedCert reads the certificate a Node's kubelet presents.
func servedCert(ctx context.Context, n *corev1.Node, dial netroute.Dialer, timeout time.Duration) (*x509.Certificate, error) {
	ip := internalIP(n)
	if ip == "" {
		return nil, fmt.Errorf("Node %s has no InternalIP", n.Name)
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = defaultKubeletPort
	}
	return DialCert(ctx, dial, net.JoinHostPort(ip, strconv.Itoa(port)), timeout)
}

// DialCert returns the leaf certificate the TLS server at addr presents. It
// does not verify it (it reports on it, whatever it is) and sends no data.
// The connection is opened through dial.
func DialCert(ctx context.Context, dial netroute.Dialer, addr string, timeout time.Duration) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Not verified on purpose: an untrusted or expired certificate is what
	// this must report; nothing is sent over the connection.
	raw, err := dial.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	// The certificate is read as it arrives: etcd ends the handshake after
	// it, for want of a client certificate.
	var leaf *x509.Certificate
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: func(certs [][]byte, _ [][]*x509.Certificate) error {
		if len(certs) == 0 {
			return nil
		}
		c, err := x509.ParseCertificate(certs[0])
		leaf = c
		return err
	}})
	defer conn.Close()
	if err := conn.HandshakeContext(ctx); err != nil && leaf == nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	if leaf == nil {
		return nil, fmt.Errorf("%s presented no certificate", addr)
	}
	return leaf, nil
}
