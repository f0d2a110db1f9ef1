package certinstall

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// LockKey is the etcd key prefix of the cluster's renewal lock.
const LockKey = "/kiln.dev/certs-renew-lock"

// lockTTL is how long the lock outlives a master that took it and died:
// its etcd lease's time to live.
const lockTTL = 60

// EtcdLock returns Install.Lock for a master: the cluster's renewal lock
// in etcd, taken through this master's etcd member (127.0.0.1:2379) with
// the API server's etcd client certificate under root. A renewal waits
// for the one under way on another master. When etcd does not answer
// within reach (its own certificates expired, or this member is down: the
// API server here cannot serve either way), it renews without the lock and
// says so; every master at once is then what `kiln certs renew` does too.
func EtcdLock(root string, reach time.Duration, log logrus.FieldLogger) func(ctx context.Context) (func(), error) {
	return func(ctx context.Context) (func(), error) {
		client, err := etcdmembers.Dial([]string{"https://127.0.0.1:2379"},
			root+nodelayout.EtcdPKIDir+"/ca.crt", root+nodelayout.PKIDir+"/apiserver-etcd-client.crt", root+nodelayout.PKIDir+"/apiserver-etcd-client.key")
		if err != nil {
			return nil, fmt.Errorf("etcd client: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, reach)
		_, err = client.Get(rctx, LockKey, clientv3.WithCountOnly())
		cancel()
		if err != nil {
			client.Close()
			log.Warnf("etcd does not answer here (%v): renewing without the cluster's renewal lock", err)
			return func() {}, nil
		}
		session, err := concurrency.NewSession(client, concurrency.WithTTL(lockTTL), concurrency.WithContext(ctx))
		if err != nil {
			client.Close()
			return nil, fmt.Errorf("etcd session for the renewal lock: %w", err)
		}
		m := concurrency.NewMutex(session, LockKey)
		if err := m.TryLock(ctx); err != nil {
			log.Infof("another master is renewing: waiting for the cluster's renewal lock")
			if err := m.Lock(ctx); err != nil {
				session.Close()
				client.Close()
				return nil, fmt.Errorf("the cluster's renewal lock: %w", err)
			}
		}
		log.Infof("holding the cluster's renewal lock")
		return func() {
			uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.Unlock(uctx); err != nil {
				log.Warnf("releasing the renewal lock: %v (its lease ends in %ds)", err, lockTTL)
			}
			session.Close()
			client.Close()
		}, nil
	}
}
