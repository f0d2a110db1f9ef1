package types

import (
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
)

func TestAccessors(t *testing.T) {
	three, two, one := int64(3), int64(2), int64(1)
	c := &Config{
		Metadata:     Metadata{Name: "dev"},
		BaseDomain:   "example.com",
		ControlPlane: &MachinePool{Replicas: &three},
		Compute:      []MachinePool{{Replicas: &two}, {Replicas: &one}, {}},
		Networking: &Networking{
			ClusterNetwork: []ClusterNetworkEntry{{CIDR: "10.128.0.0/14"}, {CIDR: "bad"}},
			ServiceNetwork: []string{"172.30.0.0/16"},
		},
		Platform: Platform{Local: &local.Platform{APIVIP: "10.66.0.1"}},
	}
	checks := []struct{ name, got, want string }{
		{"ClusterDomain", c.ClusterDomain(), "dev.example.com"},
		{"APIName", c.APIName(), "api.dev.example.com"},
		{"APIIntName", c.APIIntName(), "api-int.dev.example.com"},
		{"PlatformName", c.PlatformName(), "local"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	if c.MasterReplicas() != 3 || c.WorkerReplicas() != 3 {
		t.Errorf("replicas = %d, %d", c.MasterReplicas(), c.WorkerReplicas())
	}
	empty := &Config{Platform: Platform{None: &none.Platform{}, Local: &local.Platform{}}}
	if empty.PlatformName() != "" || empty.MasterReplicas() != 0 {
		t.Error("accessors of an empty config are not zero")
	}
}
