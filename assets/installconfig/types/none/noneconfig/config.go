package noneconfig

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
)

// Config is the none platform's install-config logic. Its section has no
// fields; the user provisions machines, DNS and the API load balancer.
type Config struct{}

// Name implements configs.Platform.
func (Config) Name() string { return none.Name }

// SetDefaults implements configs.Platform; there is nothing to default
// beyond the generic machine network.
func (Config) SetDefaults(*types.Config) {}

// Validate implements configs.Platform: machine pools have no none
// section, and the section itself has no fields, so nothing can be wrong.
func (Config) Validate(*types.Config, *field.Path) field.ErrorList { return nil }
