package installconfig

import (
	"net/netip"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
)

// MachineNames returns the names of the masters and workers c creates
// (configs.Shape): what their nodes register as.
func MachineNames(c *types.Config, infraID string) (masters, workers []string) {
	s := configs.Shape(c, infraID)
	return s.Masters, s.Workers
}

// AssignsMachineAddresses reports whether c's platform assigns its machines'
// addresses (configs.MachineAddresser), so that kiln knows every machine it
// creates by name and address: the machine inventory lists them. On the none
// platform the user's machines have whatever names and addresses the user
// gave them.
func AssignsMachineAddresses(c *types.Config) bool {
	p, found := configs.Get(c.PlatformName())
	if !found {
		return false
	}
	_, ok := p.(configs.MachineAddresser)
	return ok
}

// MachineAddresses returns the addresses c's platform assigns to the master
// or worker called name; r is c resolved. ok is false when the platform does not assign
// addresses (configs.MachineAddresser): the user's machines on the none
// platform have whatever addresses the user gave them.
func MachineAddresses(c *types.Config, r types.Resolved, infraID, name string) (addrs []netip.Addr, ok bool, err error) {
	p, found := configs.Get(c.PlatformName())
	if !found {
		return nil, false, nil
	}
	a, ok := p.(configs.MachineAddresser)
	if !ok {
		return nil, false, nil
	}
	addrs, err = a.MachineAddresses(c, r, infraID, name)
	return addrs, err == nil, err
}
