package localconfig

import (
	"net/netip"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
)

// APIVIP implements configs.APIAddresser: platform.local.apiVIP.
func (*Config) APIVIP(c *types.Config) string {
	if c.Platform.Local == nil {
		return ""
	}
	return c.Platform.Local.APIVIP
}

// Addons implements configs.AddonProvider: each add-on that
// platform.local.addons does not switch off.
func (*Config) Addons(c *types.Config) types.Addons {
	return addons(c.Platform.Local)
}

// addons returns the add-ons of the local section l: each one that
// l.Addons does not switch off; none without a section.
func addons(l *local.Platform) types.Addons {
	if l == nil {
		return types.Addons{}
	}
	a := l.Addons
	if a == nil {
		a = &local.Addons{}
	}
	return types.Addons{Storage: types.AddonOn(a.Storage), Metrics: types.AddonOn(a.Metrics),
		LoadBalancer: types.AddonOn(a.LoadBalancer), Registry: types.AddonOn(a.Registry)}
}

// ImageRegistry implements configs.AddonProvider: the registry add-on on
// the host, at the API VIP and platform.local.registryPort; ok is false
// when the add-on is off or the port not yet defaulted.
func (*Config) ImageRegistry(c *types.Config) (types.ImageRegistry, bool) {
	l := c.Platform.Local
	if l == nil || !addons(l).Registry || l.RegistryPort <= 0 || l.RegistryPort > 65535 {
		return types.ImageRegistry{}, false
	}
	vip, err := netip.ParseAddr(l.APIVIP)
	if err != nil {
		return types.ImageRegistry{}, false
	}
	return types.RegistryAt(netip.AddrPortFrom(vip, uint16(l.RegistryPort))), true
}
