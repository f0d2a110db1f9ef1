package provision

import (
	"errors"
	"net/netip"
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
