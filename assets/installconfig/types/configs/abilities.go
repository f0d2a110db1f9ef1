package configs

import "github.com/kiln-project/kiln/assets/installconfig/types"

// ability returns the Platform of c's platform section as the optional
// ability A; ok is false when c names no known platform or its platform
// lacks A.
func ability[A any](c *types.Config) (a A, ok bool) {
	p, found := Get(c.PlatformName())
	if !found {
		return a, false
	}
	a, ok = p.(A)
	return a, ok
}

// APIVIP returns the address the API of c is reached at when its platform
// sets one (APIAddresser); "" otherwise.
func APIVIP(c *types.Config) string {
	if a, ok := ability[APIAddresser](c); ok {
		return a.APIVIP(c)
	}
	return ""
}

// APIVIPIsMachine reports whether the API address of c is one of its
// machines' own (MachineAPIAddresser); false on a platform without the
// ability.
func APIVIPIsMachine(c *types.Config) bool {
	m, ok := ability[MachineAPIAddresser](c)
	return ok && m.APIVIPIsMachine(c)
}

// NodeProxy returns host:port of the API and of the machine-config server
// as every node of c reaches them through the proxy on its own loopback
// interface, when its platform runs one (NodeProxier); ok is false on a
// platform whose nodes reach both at api-int.
func NodeProxy(c *types.Config) (api, machineConfig string, ok bool) {
	n, ok := ability[NodeProxier](c)
	if !ok {
		return "", "", false
	}
	api, machineConfig = n.NodeProxy(c)
	return api, machineConfig, true
}

// Addons returns the add-ons of c: its platform's (AddonProvider), none
// on a platform without.
func Addons(c *types.Config) types.Addons {
	if a, ok := ability[AddonProvider](c); ok {
		return a.Addons(c)
	}
	return types.Addons{}
}

// ImageRegistry returns c's image registry (AddonProvider); ok is false
// when c has none.
func ImageRegistry(c *types.Config) (types.ImageRegistry, bool) {
	if a, ok := ability[AddonProvider](c); ok {
		return a.ImageRegistry(c)
	}
	return types.ImageRegistry{}, false
}

// BootstrapJoinsAsWorker reports whether c's bootstrap machine becomes a
// worker once it has been reset (BootstrapWorker).
func BootstrapJoinsAsWorker(c *types.Config) bool {
	b, ok := ability[BootstrapWorker](c)
	return ok && b.BootstrapJoinsAsWorker(c)
}
