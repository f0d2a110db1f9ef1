package tls

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"time"
)

// Subjects of the etcd member certificates issued at runtime.
const (
	// EtcdServerCNPrefix prefixes the node name in a member's serving
	// certificate CN.
	EtcdServerCNPrefix = "system:etcd-server:"
	// EtcdPeerCNPrefix prefixes the node name in a member's peer certificate CN.
	EtcdPeerCNPrefix = "system:etcd-peer:"
	// EtcdServersGroup is the O of members' serving certificates.
	EtcdServersGroup = "system:etcd-servers"
	// EtcdPeersGroup is the O of members' peer certificates.
	EtcdPeersGroup = "system:etcd-peers"
)

// EtcdMember is the pair of certificates one etcd member runs with.
type EtcdMember struct {
	// Server is the certificate of the client URLs (--cert-file): SANs
	// localhost, the loopback IPs, the node name and its IPs.
	Server CertKey
	// Peer is the certificate of the peer URLs (--peer-cert-file): SANs the
	// node name and its IPs, which etcd checks against the peer's address.
	Peer CertKey
}

// IssueEtcdMember issues the serving and peer certificates of the etcd member
// on node name with addresses ips, signed by the etcd CA, valid for
// validity (a cluster's Lifetimes.Leaf).
// It runs on the bootstrap machine, the only machine that holds the etcd CA
// key, when a member's addresses are known: its own member at first boot and
// each master's before it joins.
func IssueEtcdMember(ctx context.Context, alg Algorithm, ca *CertKey, name string, ips []net.IP, validity time.Duration) (EtcdMember, error) {
	if name == "" || len(ips) == 0 {
		return EtcdMember{}, errors.New("an etcd member needs a node name and at least one IP address")
	}
	server, err := issue(ctx, alg, ca, certSpec{
		Subject:  pkix.Name{CommonName: EtcdServerCNPrefix + name, Organization: []string{EtcdServersGroup}},
		DNSNames: []string{"localhost", name},
		IPs:      append(loopbackIPs(), ips...),
		Usage:    usageServerClient,
		Validity: validity,
	})
	if err != nil {
		return EtcdMember{}, fmt.Errorf("etcd serving certificate of %s: %w", name, err)
	}
	peer, err := issue(ctx, alg, ca, certSpec{
		Subject:  pkix.Name{CommonName: EtcdPeerCNPrefix + name, Organization: []string{EtcdPeersGroup}},
		DNSNames: []string{name},
		IPs:      ips,
		Usage:    usageServerClient,
		Validity: validity,
	})
	if err != nil {
		return EtcdMember{}, fmt.Errorf("etcd peer certificate of %s: %w", name, err)
	}
	return EtcdMember{Server: server, Peer: peer}, nil
}
