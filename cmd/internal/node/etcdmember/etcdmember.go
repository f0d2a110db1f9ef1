// Package etcdmember issues and installs the certificates of one etcd member
// and checks a member's state. The bootstrap machine, which alone holds the
// etcd CA key, issues its own member's certificates at first boot and each
// master's before that master's member is added.
package etcdmember

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph/atomicfile"
)

// File names of a member's certificates in its PKI directory.
const (
	CACert     = "ca.crt"
	CAKey      = "ca.key"
	ServerCert = "server.crt"
	ServerKey  = "server.key"
	PeerCert   = "peer.crt"
	PeerKey    = "peer.key"
)

// LoadCA reads the etcd CA certificate and key from dir.
func LoadCA(dir string) (*kilntls.CertKey, error) {
	cert, err := os.ReadFile(filepath.Join(dir, CACert))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, err
	}
	return &kilntls.CertKey{Cert: cert, Key: key}, nil
}

// Issue issues the member certificates of node name at ip, with a key of the
// CA's own type.
func Issue(ctx context.Context, ca *kilntls.CertKey, name string, ip net.IP) (kilntls.EtcdMember, error) {
	key, err := ca.PrivateKey()
	if err != nil {
		return kilntls.EtcdMember{}, fmt.Errorf("etcd CA key: %w", err)
	}
	return kilntls.IssueEtcdMember(ctx, algorithmOf(key), ca, name, []net.IP{ip})
}

// Files returns the member's certificate files by name, keys included.
func Files(caCert []byte, m kilntls.EtcdMember) map[string][]byte {
	return map[string][]byte{
		CACert:     caCert,
		ServerCert: m.Server.Cert,
		ServerKey:  m.Server.Key,
		PeerCert:   m.Peer.Cert,
		PeerKey:    m.Peer.Key,
	}
}

// WriteFiles writes files into dir atomically; names ending in .key are 0600.
func WriteFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		mode := os.FileMode(0o644)
		if filepath.Ext(name) == ".key" {
			mode = 0o600
		}
		if err := atomicfile.Write(filepath.Join(dir, name), data, mode); err != nil {
			return err
		}
	}
	return nil
}

// Client returns an etcd client for endpoints authenticated with a client
// certificate and trusting caFile.
func Client(endpoints []string, caFile, certFile, keyFile string) (*clientv3.Client, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	return ClientPEM(endpoints, ca, cert, key)
}

// ClientPEM is Client with the CA, certificate and key given as PEM.
func ClientPEM(endpoints []string, ca, cert, key []byte) (*clientv3.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("etcd CA: no certificate")
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		Logger:      nopLogger(),
	})
}

func algorithmOf(key crypto.Signer) kilntls.Algorithm {
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		return kilntls.ECDSAP256
	}
	return kilntls.RSA2048
}

// PeerURL is the peer URL of the member at ip.
func PeerURL(ip string) string { return "https://" + net.JoinHostPort(ip, "2380") }

// ByPeerURL returns the member of ms with peer URL url, or nil.
func ByPeerURL(ms []*etcdserverpb.Member, url string) *etcdserverpb.Member {
	for _, m := range ms {
		if slices.Contains(m.PeerURLs, url) {
			return m
		}
	}
	return nil
}

// Learner returns the first learner of ms, or nil: etcd takes one learner
// at a time.
func Learner(ms []*etcdserverpb.Member) *etcdserverpb.Member {
	for _, m := range ms {
		if m.IsLearner {
			return m
		}
	}
	return nil
}
