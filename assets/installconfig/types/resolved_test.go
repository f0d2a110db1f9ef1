package types

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Resolve types every value it resolves, takes the timeouts' defaults
// where they are unset, and names every field that does not resolve.
func TestResolve(t *testing.T) {
	c := &Config{
		KubernetesVersion: "1.36.3",
		Networking: &Networking{
			MachineNetwork: []MachineNetworkEntry{{CIDR: "10.66.7.0/24"}},
			ClusterNetwork: []ClusterNetworkEntry{{CIDR: "10.128.0.0/14"}},
			ServiceNetwork: []string{"172.30.0.0/16"},
		},
		Timeouts: &Timeouts{Bootstrap: "45m"},
	}
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Release.Kubernetes != "v1.36.3" || r.MachineNetwork != netip.MustParsePrefix("10.66.7.0/24") ||
		r.ServiceNetwork != netip.MustParsePrefix("172.30.0.0/16") || len(r.ClusterNetworks) != 1 ||
		r.ClusterNetworks[0] != netip.MustParsePrefix("10.128.0.0/14") {
		t.Errorf("Resolve = %+v", r)
	}
	if r.Egress != EgressNone || r.NAT() {
		t.Errorf("Egress of a config without networking.egress = %q, NAT %v; want None: it was created sealed", r.Egress, r.NAT())
	}
	c.Networking.Egress = EgressNAT
	if r, err := c.Resolve(); err != nil || !r.NAT() {
		t.Errorf("Resolve with egress NAT = %+v, %v", r, err)
	}
	if got := r.FirstServiceIP(); got != netip.MustParseAddr("172.30.0.1") {
		t.Errorf("FirstServiceIP = %v, want 172.30.0.1", got)
	}
	if got := r.DNSServiceIP(); got != netip.MustParseAddr("172.30.0.10") {
		t.Errorf("DNSServiceIP = %v, want 172.30.0.10", got)
	}
	if want := (ResolvedTimeouts{API: 20 * time.Minute, Bootstrap: 45 * time.Minute, Install: 30 * time.Minute}); r.Timeouts != want {
		t.Errorf("Timeouts = %+v, want %+v", r.Timeouts, want)
	}
	c.KubernetesVersion, c.Timeouts.Install, c.Networking.MachineNetwork[0].CIDR = "1.20.0", "soon", "bad"
	c.Networking.Egress = "Open"
	_, err = c.Resolve()
	for _, field := range []string{"kubernetesVersion", "timeouts.install", "networking.machineNetwork[0].cidr", "networking.egress"} {
		if err == nil || !strings.Contains(err.Error(), "install-config.yaml: "+field+": ") {
			t.Errorf("error %v does not name %s", err, field)
		}
	}
}

// The Service addresses of a service network too small to hold them, or
// of none, are the zero Addr.
func TestServiceIPsOfSmallNetworks(t *testing.T) {
	if ip := (Resolved{}).FirstServiceIP(); ip.IsValid() {
		t.Errorf("FirstServiceIP of no network = %v, want none", ip)
	}
	small := Resolved{ServiceNetwork: netip.MustParsePrefix("10.0.0.0/29")}
	if ip := small.DNSServiceIP(); ip.IsValid() {
		t.Errorf("DNSServiceIP of a /29 = %v, want none", ip)
	}
	if ip := small.FirstServiceIP(); ip != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("FirstServiceIP of a /29 = %v, want 10.0.0.1", ip)
	}
}
