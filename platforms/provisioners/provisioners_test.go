package provisioners

import (
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/provision"
)

func TestGet(t *testing.T) {
	env := platforms.Env{Kiln: "/kiln"}
	p, ok := Get("local", env)
	if lp, isLocal := p.(*provision.Provisioner); !ok || !isLocal || lp.Env.Kiln != "/kiln" {
		t.Errorf("Get(local) = %#v, %v", p, ok)
	}
	if p, ok := Get("none", env); ok {
		t.Errorf("Get(none) = %#v: the user provisions none's machines", p)
	}
}

// Every provisioner belongs to a platform whose install-config section
// exists.
func TestEveryProvisionerHasAConfig(t *testing.T) {
	for _, e := range entries() {
		if _, ok := configs.Get(e.platform); !ok {
			t.Errorf("provisioner of %s, which has no config package in platforms/configs", e.platform)
		}
	}
}
