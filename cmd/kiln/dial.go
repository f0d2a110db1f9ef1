package main

import (
	"context"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// readOnlyDialer returns the dialer of --dir's cluster (install.Cluster.Dialer:
// its platform's route policy) for the commands that only read --dir. It
// builds no provisioner environment (no debug log, no cached binary): the
// policy needs none. With no cluster in --dir's state, there is no cluster
// of kiln's whose routes could be known: every address is allowed.
func (o *rootOptions) readOnlyDialer() (netroute.Dialer, error) {
	c, found, err := install.StateCluster(o.dir)
	if err != nil || !found {
		if err != nil {
			o.log.Debugf("no route policy from --dir's state: %v", err)
		}
		return netroute.Dialer{}, nil
	}
	prov, err := install.Provisioner(c.Config.PlatformName(), platforms.Env{Log: o.log})
	if err != nil {
		o.log.Debugf("no route policy: %v", err)
		prov = nil
	}
	return c.Dialer(prov)
}

// checkAPIRoute refuses, without a packet sent, a kubeconfig whose API
// server no route of --dir's cluster leads to now (a local cluster whose
// bridge is gone), for the commands that hand the kubeconfig to another
// program.
func (o *rootOptions) checkAPIRoute(ctx context.Context, kubeconfig string) error {
	d, err := o.readOnlyDialer()
	if err != nil || d.Policy == nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil // kubectl says what is wrong with it
	}
	u, err := url.Parse(rc.Host)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	return d.CheckHost(ctx, u.Hostname())
}
