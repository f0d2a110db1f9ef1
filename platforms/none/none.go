package none

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/platforms"
)

var _ platforms.Platform = Config{}

// Name is the key of the none platform's install-config section.
const Name = "none"

// Config is the none platform's install-config logic. Its section has no
// fields; the user provisions machines, DNS and the API load balancer.
type Config struct{}

// Name implements platforms.Platform.
func (Config) Name() string { return Name }

// SetDefaults implements platforms.Platform; there is nothing to default
// beyond the generic machine network.
func (Config) SetDefaults(*types.Config) {}

// Validate implements platforms.Platform: machine pools have no none
// section, and the section itself has no fields, so nothing can be wrong.
func (Config) Validate(*types.Config, *field.Path) field.ErrorList { return nil }
