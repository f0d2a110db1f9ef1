package install

import (
	"fmt"

	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/provisioners"
)

// Provisioner returns the provisioner of the named platform in env. A
// platform kiln does not provision is an input error that says what to do
// instead.
func Provisioner(platform string, env platforms.Env) (platforms.Provisioner, error) {
	if p, ok := provisioners.Get(platform, env); ok {
		return p, nil
	}
	if _, known := configs.Get(platform); !known {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf("platform %s: provisioning is not implemented yet", platform))
	}
	return nil, exitcode.With(exitcode.Input, fmt.Errorf("platform %s: kiln provisions no machines; boot yours with bootstrap.ign, "+
		"master.ign and worker.ign from `kiln create ignition-configs`, then run `kiln wait-for bootstrap-complete`", platform))
}
