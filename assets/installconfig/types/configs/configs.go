// Package configs lists the install-config logic of every platform kiln
// implements. It is what assets import, so it lists only the platforms'
// leaf config packages, never their provisioning (see platforms/provisioners).
// Platform packages must import only assets/installconfig/types (never
// assets/installconfig) so that the install-config asset can import this
// list without a cycle.
package configs

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/local/localconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/none/noneconfig"
)

// Platforms returns every implemented platform, the default first.
func Platforms() []Platform {
	return []Platform{localconfig.New(), noneconfig.Config{}}
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
