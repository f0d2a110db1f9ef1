package etcdmembers

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
)

// File names of a member's certificates in its PKI directory and in the
// installer's files.
const (
	CACert     = "ca.crt"
	CAKey      = "ca.key"
	ServerCert = "server.crt"
	ServerKey  = "server.key"
	PeerCert   = "peer.crt"
	PeerKey    = "peer.key"
)

// ManifestFile is the etcd static pod's key in the installer's files and
// its name among the kubelet's static pods.
const ManifestFile = "etcd.yaml"

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
// CA's own type, valid for validity.
func Issue(ctx context.Context, ca *kilntls.CertKey, name string, ip net.IP, validity time.Duration) (kilntls.EtcdMember, error) {
	key, err := ca.PrivateKey()
	if err != nil {
		return kilntls.EtcdMember{}, fmt.Errorf("etcd CA key: %w", err)
	}
	return kilntls.IssueEtcdMember(ctx, algorithmOf(key), ca, name, []net.IP{ip}, validity)
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

func algorithmOf(key crypto.Signer) kilntls.Algorithm {
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		return kilntls.ECDSAP256
	}
	return kilntls.RSA2048
}

// ClientPKIFromState reads the etcd CA's certificate and the API server's
// etcd client certificate and key from the state file of dir: what kiln
// dials etcd with from the host (DialPEM).
func ClientPKIFromState(dir string) (ca, cert, key []byte, err error) {
	store, err := graph.Open(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	c, client := &kilntls.EtcdCA{}, &kilntls.APIServerEtcdClient{}
	for _, a := range []graph.Asset{c, client} {
		if found, err := store.FromState(a); err != nil || !found {
			return nil, nil, nil, fmt.Errorf("%s is not in the state of %s: %v", a.Name(), dir, err)
		}
	}
	return c.Cert, client.Cert, client.Key, nil
}
