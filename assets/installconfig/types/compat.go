package types

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/none"
)

// The former names of the platforms' sections, until the callers are
// rewritten to packages local and none.
type (
	// LocalPlatform is local.Platform.
	LocalPlatform = local.Platform
	// LocalMachinePool is local.MachinePool.
	LocalMachinePool = local.MachinePool
	// LocalAddons is local.Addons.
	LocalAddons = local.Addons
	// NonePlatform is none.Platform.
	NonePlatform = none.Platform
)
