package etcdmembers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Client is the part of an etcd client membership changes use;
// *clientv3.Client has it.
type Client interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	MemberAddAsLearner(ctx context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error)
	MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error)
	MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error)
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

// dialTimeout bounds the connection to the endpoints.
const dialTimeout = 5 * time.Second

// Dial returns an etcd client for endpoints authenticated with the client
// certificate in certFile and keyFile and trusting the CA in caFile.
func Dial(endpoints []string, caFile, certFile, keyFile string) (*clientv3.Client, error) {
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
	return DialPEM(endpoints, ca, cert, key, nil)
}

// DialFunc opens a TCP connection to host:port; kiln's commands pass one
// that refuses an address no route of the cluster's own leads to
// (netroute.Dialer).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// DialPEM is Dial with the CA, certificate and key given as PEM; every
// connection goes through dial (a plain dial when nil).
func DialPEM(endpoints []string, ca, cert, key []byte, dial DialFunc) (*clientv3.Client, error) {
	tc, err := TLSConfig(ca, cert, key)
	if err != nil {
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		TLS:         tc,
		// The etcd client's own logging stays out of kiln's output.
		Logger: zap.NewNop(),
	}
	if dial != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})}
	}
	return clientv3.New(cfg)
}

// TLSConfig is the client side of etcd's mutual TLS: the client
// certificate and key, and the etcd CA as the only root, all PEM.
func TLSConfig(ca, cert, key []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("etcd CA: no certificate")
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
