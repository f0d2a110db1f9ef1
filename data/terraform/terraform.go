// Package terraform holds kiln's Terraform modules, embedded in the binary:
// one directory per platform (local/, ssh/), each with one root module per
// stage (local: network/, bootstrap/, cluster/; ssh: bootstrap/, cluster/)
// and shared *.tf files at its top that kiln copies into every stage (see
// platforms/terraform.Driver). It also defines the variables kiln writes
// for each platform's modules (LocalVars, SSHVars).
package terraform

import (
	"embed"
	"io/fs"
)

// modules is the module tree.
//
//go:embed local ssh
var modules embed.FS

// Platform returns the module tree of the named platform, rooted at its
// directory, as platforms/terraform.DriverOptions.Modules expects.
func Platform(name string) (fs.FS, error) {
	if _, err := fs.Stat(modules, name); err != nil {
		return nil, err
	}
	return fs.Sub(modules, name)
}
