package platforms

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// Platform is what the install-config asset asks of a platform backend. Each
// platform package owns its install-config section: its defaults and its
// validation. Core assets never switch on a platform's name.
type Platform interface {
	// Name is the key of the platform's section in install-config.yaml
	// ("local", "none", ...).
	Name() string
	// SetDefaults fills unset fields of the platform section and of the
	// machine pools' platform sections.
	SetDefaults(c *types.Config)
	// Validate checks the platform section and the machine pools' platform
	// sections; fldPath is the path of the platform section ("platform.local").
	Validate(c *types.Config, fldPath *field.Path) field.ErrorList
}
