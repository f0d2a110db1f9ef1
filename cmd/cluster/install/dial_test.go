package install

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// routerProv is a provisioner whose cluster addresses are reached through
// the interface bridge, and whose kernel (a fake lookup) routes every
// address through eth0: the bridge does not exist yet.
type routerProv struct {
	platforms.Provisioner
	bridge string
}

func (p routerProv) DialPolicy(*platforms.Cluster) (netroute.Policy, error) {
	return netroute.Through{Interface: p.bridge, Lookup: func(a netip.Addr) (netroute.Route, error) {
		return netroute.Route{Dest: a, Source: netip.MustParseAddr("192.0.2.2"), Interface: "eth0"}, nil
	}}, nil
}

// Before provisioning, create asks the API whether bootstrap is complete.
// With no route of the cluster's own to the API VIP, the answer is "not
// complete" and the client's error names the refusal; nothing is dialed.
// (The server is on loopback, so a broken policy would reach nothing.)
func TestAPIWithoutOwnRouteDialsNothing(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(kc, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Cluster: platforms.Cluster{Dir: dir, Config: &types.Config{}}, Kubeconfig: kc}
	api, err := c.API(logrus.New(), nil, routerProv{bridge: "kiln-abc"})
	if err != nil {
		t.Fatal(err)
	}
	if api.IsBootstrapComplete(context.Background()) {
		t.Fatal("bootstrap complete through a refused route")
	}
	_, err = api.Client.Discovery().ServerVersion()
	var ue *netroute.UnreachableError
	if !errors.As(err, &ue) || ue.Addr.String() != "127.0.0.1" {
		t.Fatalf("API call: %v, want *netroute.UnreachableError for 127.0.0.1", err)
	}
	// Without a Router (nil provisioner) every address is allowed.
	d, err := c.Dialer(nil)
	if err != nil || d.Policy.Check(netip.MustParseAddr("127.0.0.1")) != nil {
		t.Fatalf("Dialer(nil): %v, %v", d, err)
	}
}
