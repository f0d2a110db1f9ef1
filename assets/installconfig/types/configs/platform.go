package configs

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// Platform is what the install-config asset asks of a platform's config
// logic. Each platform owns its install-config section (types/<platform>):
// its defaults and its validation. Core assets never switch on a
// platform's name.
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

// MachineAddresser is an optional ability of a Platform whose machines get
// addresses that follow from the install-config alone, known before any
// machine exists. kiln publishes them in the machine inventory (ConfigMap
// kube-system/kiln-machines), the only names and addresses a kubelet
// serving certificate is approved for; on a platform without it the
// inventory starts empty and the administrator fills it in.
type MachineAddresser interface {
	// MachineAddresses returns the addresses of c's master or worker
	// called name (a machines.Name of infraID).
	MachineAddresses(c *types.Config, infraID, name string) ([]netip.Addr, error)
}

// MachineNamer is an optional ability of a Platform whose machines are
// named by the install-config: the ssh platform's hosts, whose nodes take
// their hostnames. Without it, machines are named
// <infraID>-master-<i> and <infraID>-worker-<i> (machines.DefaultShape).
type MachineNamer interface {
	// MachineNames returns the names of c's masters and workers.
	MachineNames(c *types.Config, infraID string) (masters, workers []string)
}
