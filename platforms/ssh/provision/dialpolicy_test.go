package provision

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// An ssh cluster's declared addresses are dialed, and no other - not an
// address a node reports; a host that a scale declares is dialed from then
// on.
func TestDialPolicyDeclaredHosts(t *testing.T) {
	c := exampleCluster(t)
	s := c.Config.Platform.SSH
	s.APIVIP = "10.20.0.250"
	p, err := (&Provisioner{}).DialPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range append([]string{s.APIVIP}, s.Hosts[0].Address, s.Hosts[len(s.Hosts)-1].Address) {
		if err := p.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("declared %s: %v", a, err)
		}
	}
	const added = "10.20.0.77"
	var ue *netroute.UnreachableError
	if err := p.Check(netip.MustParseAddr(added)); !errors.As(err, &ue) {
		t.Fatalf("undeclared %s: %v", added, err)
	}
	s.Hosts = append(s.Hosts, ssh.Host{Name: "extra", Address: added, Role: "worker"})
	if err := p.Check(netip.MustParseAddr(added)); err != nil {
		t.Errorf("%s once declared: %v", added, err)
	}
	s.Hosts[0].Address = "not an address"
	if _, err := (&Provisioner{}).DialPolicy(c); err == nil {
		t.Error("a host address that does not parse: no error")
	}
}

// The API VIP kiln keeps has the masters for stand-ins, as declared at the
// call; an address that is not that VIP, a VIP that is a master's own
// address or the user's load balancer has none.
func TestAPIStandIns(t *testing.T) {
	c := exampleCluster(t)
	s := c.Config.Platform.SSH
	s.APIVIP = "10.20.0.250"
	vip := netip.MustParseAddr(s.APIVIP)
	var want []netip.Addr
	for _, h := range s.Hosts {
		if h.Role == ssh.RoleMaster {
			want = append(want, netip.MustParseAddr(h.Address))
		}
	}
	p := &Provisioner{}
	if got := p.APIStandIns(c, vip); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("stand-ins of the VIP: %v, want the masters %v", got, want)
	}
	if got := p.APIStandIns(c, want[0]); got != nil {
		t.Errorf("stand-ins of a master's address: %v", got)
	}
	s.Hosts = slices.DeleteFunc(s.Hosts, func(h ssh.Host) bool { return h.Address == want[0].String() })
	if got := p.APIStandIns(c, vip); slices.Contains(got, want[0]) {
		t.Errorf("a master no longer declared stands in: %v", got)
	}
	no := false
	s.APIVIPManaged = &no
	if got := p.APIStandIns(c, vip); got != nil {
		t.Errorf("the user's own load balancer has stand-ins: %v", got)
	}
}
