// Package provisioners lists the platforms whose infrastructure kiln
// provisions, each with its provisioner. A platform missing from the list
// (none) is one whose machines the user provides; the commands say so
// without naming it. Assets never import this package: it pulls in
// Terraform, machines and node images.
package provisioners

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/platforms"
	localprovision "github.com/kiln-project/kiln/platforms/local/provision"
	sshprovision "github.com/kiln-project/kiln/platforms/ssh/provision"
)

// entry is one platform's provisioner constructor.
type entry struct {
	platform string
	new      func(platforms.Env) platforms.Provisioner
}

func entries() []entry {
	return []entry{
		{local.Name, func(env platforms.Env) platforms.Provisioner { return &localprovision.Provisioner{Env: env} }},
		{ssh.Name, func(env platforms.Env) platforms.Provisioner { return &sshprovision.Provisioner{Env: env} }},
	}
}

// Get returns the provisioner of the named platform in env, or false when
// kiln does not provision that platform's infrastructure.
func Get(name string, env platforms.Env) (platforms.Provisioner, bool) {
	for _, e := range entries() {
		if e.platform == name {
			return e.new(env), true
		}
	}
	return nil, false
}
