package provision

import (
	"testing"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// A local cluster's addresses are reached through its own bridge: the
// default one of its infra ID, or platform.local.bridgeName.
func TestDialPolicyIsTheBridge(t *testing.T) {
	c := &platforms.Cluster{Config: planConfig(1, 1), InfraID: "demo-x7k2p"}
	for _, tc := range []struct{ name, want string }{{"", "kiln-x7k2p"}, {"br-lab", "br-lab"}} {
		c.Config.Platform.Local.BridgeName = tc.name
		p, err := (&Provisioner{}).DialPolicy(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := p.(netroute.Through); !ok || got.Interface != tc.want {
			t.Errorf("bridgeName %q: policy %#v, want through %s", tc.name, p, tc.want)
		}
	}
}
