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
	// called name (a machines.Name of infraID); r is c resolved.
	MachineAddresses(c *types.Config, r types.Resolved, infraID, name string) ([]netip.Addr, error)
}

// MachineNamer is an optional ability of a Platform whose machines are
// named by the install-config: the ssh platform's hosts, whose nodes take
// their hostnames. Without it, machines are named
// <infraID>-master-<i> and <infraID>-worker-<i> (machines.DefaultShape).
type MachineNamer interface {
	// MachineNames returns the names of c's masters and workers.
	MachineNames(c *types.Config, infraID string) (masters, workers []string)
}

// APIAddresser is an optional ability of a Platform whose section sets the
// address the API is reached at (platform.local.apiVIP,
// platform.ssh.apiVIP). Without it, the API has no address of its own in
// the install-config.
type APIAddresser interface {
	// APIVIP returns the API's address of c, "" when unset.
	APIVIP(c *types.Config) string
}

// MachineAPIAddresser is an optional ability of a Platform whose API
// address may be a machine's own (ssh: apiVIP may be a master's address
// where no load balancer stands before the masters). Without it, the API's
// address belongs to no machine.
type MachineAPIAddresser interface {
	// APIVIPIsMachine reports whether c's API address is the address or
	// the name of one of its machines.
	APIVIPIsMachine(c *types.Config) bool
}

// NodeProxier is an optional ability of a Platform whose nodes reach the API
// and the machine-config server through a proxy on their own loopback
// interface (ssh). Without it, nodes reach both at api-int, the DNS name
// of the platform's load balancer.
type NodeProxier interface {
	// NodeProxy returns host:port of the API and of the machine-config
	// server as every node of c reaches them.
	NodeProxy(c *types.Config) (api, machineConfig string)
}

// AddonProvider is an optional ability of a Platform that runs add-ons
// (storage, metrics, LoadBalancer Services, an image registry). Without
// it, a cluster gets none.
type AddonProvider interface {
	// Addons returns the add-ons of c, after defaulting.
	Addons(c *types.Config) types.Addons
	// ImageRegistry returns c's image registry; ok is false when it has
	// none (the add-on switched off, or a config not yet defaulted).
	ImageRegistry(c *types.Config) (r types.ImageRegistry, ok bool)
}

// BootstrapWorker is an optional ability of a Platform whose bootstrap
// machine may become a worker once it has been reset (ssh's bootstrap
// host with joinAsWorker).
type BootstrapWorker interface {
	// BootstrapJoinsAsWorker reports whether c's bootstrap machine joins
	// as a worker.
	BootstrapJoinsAsWorker(c *types.Config) bool
}
