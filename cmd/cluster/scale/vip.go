package scale

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/cmd/cluster/apivip"
)

// moveVIPOff takes the master name out of the masters that may announce
// the API VIP that kiln keeps, and waits until one of others announces it:
// as with the API proxies, no request at the VIP then goes to an API
// server about to lose its etcd member.
func (r *Runner) moveVIPOff(ctx context.Context, name string, others []string) error {
	if configs.Addons(r.Cluster.Config).APIVIP == "" || len(others) == 0 {
		return nil
	}
	m := apivip.Mover{Kube: r.Kube, Poll: r.Poll, Warn: func(s string) { r.Log.Warn(s) }}
	return r.step("Moving the API VIP off "+name, func() error { return m.Off(ctx, name, others) })
}
