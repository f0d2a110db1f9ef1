package all

import (
	"fmt"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local"
)

// Provisioner returns the provisioner of the named platform. Platforms whose
// infrastructure the user provides (none) have none.
func Provisioner(name string, env platforms.Env) (platforms.Provisioner, error) {
	switch name {
	case "local":
		return &local.Provisioner{Env: env}, nil
	case "none":
		return nil, graph.WithKind(graph.KindInput, fmt.Errorf("platform none: kiln provisions no machines; boot yours with bootstrap.ign, master.ign and worker.ign from `kiln create ignition-configs`, then run `kiln wait-for bootstrap-complete`"))
	}
	return nil, graph.WithKind(graph.KindInput, fmt.Errorf("platform %s: provisioning is not implemented yet", name))
}
