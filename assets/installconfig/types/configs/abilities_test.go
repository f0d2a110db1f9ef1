package configs

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// Each platform's abilities answer for its own section; a platform without
// one gets the zero answer.
func TestAbilities(t *testing.T) {
	localCfg := &types.Config{Platform: types.Platform{Local: &local.Platform{APIVIP: "10.66.0.1"}}}
	sshCfg := &types.Config{Platform: types.Platform{SSH: &ssh.Platform{APIVIP: "192.168.1.10",
		Hosts: []ssh.Host{{Name: "b", Role: ssh.RoleBootstrap, JoinAsWorker: true}}}}}
	noneCfg := &types.Config{Platform: types.Platform{None: &none.Platform{}}}
	if got := APIVIP(localCfg); got != "10.66.0.1" {
		t.Errorf("APIVIP(local) = %q", got)
	}
	if got := APIVIP(sshCfg); got != "192.168.1.10" {
		t.Errorf("APIVIP(ssh) = %q", got)
	}
	if got := APIVIP(noneCfg); got != "" {
		t.Errorf("APIVIP(none) = %q", got)
	}
	if api, mcs, ok := NodeProxy(sshCfg); !ok || api != "localhost:6444" || mcs != "localhost:22624" {
		t.Errorf("NodeProxy(ssh) = %q, %q, %v", api, mcs, ok)
	}
	if _, _, ok := NodeProxy(localCfg); ok {
		t.Error("NodeProxy(local) is set")
	}
	if APIVIPIsMachine(sshCfg) || APIVIPIsMachine(localCfg) {
		t.Error("APIVIPIsMachine: want false where no host has the VIP's address")
	}
	sshCfg.Platform.SSH.Hosts = append(sshCfg.Platform.SSH.Hosts, ssh.Host{Name: "m", Address: "192.168.1.10", Role: ssh.RoleMaster})
	if !APIVIPIsMachine(sshCfg) {
		t.Error("APIVIPIsMachine(ssh) with apiVIP a master's address: want true")
	}
	if !BootstrapJoinsAsWorker(sshCfg) || BootstrapJoinsAsWorker(localCfg) {
		t.Error("BootstrapJoinsAsWorker: want true on ssh with joinAsWorker, false on local")
	}
}

func TestAddons(t *testing.T) {
	f, tr := false, true
	on := func(storage, metrics, loadBalancer, registry bool) types.Addons {
		return types.Addons{Storage: storage, Metrics: metrics, LoadBalancer: loadBalancer, Registry: registry}
	}
	tests := []struct {
		name string
		p    types.Platform
		want types.Addons
	}{
		{"local, no addons section: all on", types.Platform{Local: &local.Platform{}}, on(true, true, true, true)},
		{"local, empty section: all on", types.Platform{Local: &local.Platform{Addons: &local.Addons{}}}, on(true, true, true, true)},
		{"local, two off", types.Platform{Local: &local.Platform{Addons: &local.Addons{Storage: &f, Metrics: &tr, LoadBalancer: &f}}}, on(false, true, false, true)},
		{"local, registry off", types.Platform{Local: &local.Platform{Addons: &local.Addons{Registry: &f}}}, on(true, true, true, false)},
		{"none: no add-ons", types.Platform{None: &none.Platform{}}, types.Addons{}},
		{"ssh, no addons section: storage and metrics", types.Platform{SSH: &ssh.Platform{}}, on(true, true, false, false)},
		{"ssh, metrics off", types.Platform{SSH: &ssh.Platform{Addons: &ssh.Addons{Metrics: &f}}}, on(true, false, false, false)},
		{"ssh, storage off", types.Platform{SSH: &ssh.Platform{Addons: &ssh.Addons{Storage: &f, Metrics: &tr}}}, on(false, true, false, false)},
		{"ssh, load balancer addresses: MetalLB", types.Platform{SSH: &ssh.Platform{LoadBalancerIPs: []string{"192.0.2.200-192.0.2.210"}}},
			types.Addons{Storage: true, Metrics: true, LoadBalancer: true, LoadBalancerIPs: []string{"192.0.2.200-192.0.2.210"}}},
	}
	for _, tt := range tests {
		c := &types.Config{Platform: tt.p}
		if got := Addons(c); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Addons() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestImageRegistry(t *testing.T) {
	off := false
	withLocal := func(p local.Platform) *types.Config { return &types.Config{Platform: types.Platform{Local: &p}} }
	r, ok := ImageRegistry(withLocal(local.Platform{APIVIP: "10.66.110.1", RegistryPort: 5002}))
	if !ok || r.Name != "localhost:5002" || r.Endpoint != netip.MustParseAddrPort("10.66.110.1:5002") ||
		!slices.Equal(r.Mirrors, []string{"kiln.local", "registry.k8s.io", "docker.io"}) {
		t.Errorf("ImageRegistry = %+v, %v", r, ok)
	}
	for name, c := range map[string]*types.Config{
		"add-on off":    withLocal(local.Platform{APIVIP: "10.66.110.1", RegistryPort: 5002, Addons: &local.Addons{Registry: &off}}),
		"no port":       withLocal(local.Platform{APIVIP: "10.66.110.1"}),
		"port too high": withLocal(local.Platform{APIVIP: "10.66.110.1", RegistryPort: 70000}),
		"no VIP":        withLocal(local.Platform{RegistryPort: 5002}),
		"platform none": {Platform: types.Platform{None: &none.Platform{}}},
		"platform ssh":  {Platform: types.Platform{SSH: &ssh.Platform{APIVIP: "10.66.110.1"}}},
	} {
		if r, ok := ImageRegistry(c); ok {
			t.Errorf("%s: ImageRegistry = %+v, want none", name, r)
		}
	}
}
