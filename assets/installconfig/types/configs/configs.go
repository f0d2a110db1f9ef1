// Package configs is the contract between install-config.yaml and the
// platforms: Platform, what the install-config asset asks of a platform's
// config logic, and the list of every platform kiln implements
// (Platforms). It is one of the contracts (test/layering), with the
// platforms' config packages it lists (types/<platform>/<platform>config): they import only
// packages under assets/installconfig/types, so assets, platforms and
// commands can all import this list. A platform's provisioning is listed
// apart, in platforms/provisioners.
package configs

import (
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local/localconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/installconfig/types/none/noneconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
)

// Platforms returns every implemented platform, the default first. A new
// platform's config logic is registered here, by one entry.
func Platforms() []Platform {
	return []Platform{localconfig.New(), noneconfig.Config{}, sshconfig.Config{}}
}

// Default returns the name of the default platform: the one a cluster is
// taken to be on when nothing in --dir names its platform.
func Default() string { return Platforms()[0].Name() }

// Names returns the platforms' install-config keys, the default first.
func Names() []string {
	ps := Platforms()
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name()
	}
	return names
}

// Get returns the platform called name.
func Get(name string) (Platform, bool) {
	for _, p := range Platforms() {
		if p.Name() == name {
			return p, true
		}
	}
	return nil, false
}

// Shape returns the names of c's masters and workers: the platform's
// (MachineNamer), else machines.DefaultShape's for infraID.
func Shape(c *types.Config, infraID string) machines.Shape {
	if n, ok := ability[MachineNamer](c); ok {
		m, w := n.MachineNames(c, infraID)
		return machines.Shape{Masters: m, Workers: w}
	}
	return machines.DefaultShape(infraID, c.MasterReplicas(), c.WorkerReplicas())
}
