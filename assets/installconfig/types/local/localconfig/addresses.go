package localconfig

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
)

// Address plan inside machineNetwork[0]: the API VIP is the host's address
// on the bridge (defaulted to the first address), then fixed offsets. A
// machine's address follows from its name's index (master i at offset
// MasterOffset+i, worker i at WorkerOffset+i), so it keeps its address
// whatever else is added or removed, and kiln knows it before the machine
// exists.
const (
	BootstrapOffset = 10
	MasterOffset    = 11
	WorkerOffset    = 20
)

// BootstrapAddress returns the bootstrap machine's address on the machine
// network cidr.
func BootstrapAddress(cidr netip.Prefix) (netip.Addr, error) {
	return addressAt(cidr, BootstrapOffset)
}

// MachineAddress returns the role (machines.RoleMaster or RoleWorker) and
// the address of the machine called name, a machines.Name of infraID. It
// is a pure function of the machine network cidr and the name's index; a name
// of another cluster, a master index that would reach the workers'
// addresses, or an address outside the machine network is an error.
func MachineAddress(cidr netip.Prefix, infraID, name string) (role string, addr netip.Addr, err error) {
	role, i, ok := machines.Index(infraID, name)
	if !ok {
		return "", netip.Addr{}, fmt.Errorf("machine name %q is not a master or worker of %s", name, infraID)
	}
	off := WorkerOffset + i
	if role == machines.RoleMaster {
		if MasterOffset+i >= WorkerOffset {
			return "", netip.Addr{}, fmt.Errorf("machine %s: at most %d master indexes fit before the workers' addresses", name, WorkerOffset-MasterOffset)
		}
		off = MasterOffset + i
	}
	addr, err = addressAt(cidr, off)
	return role, addr, err
}

// MachineAddresses implements configs.MachineAddresser: the one address
// of the master or worker called name, on the resolved machine network.
func (*Config) MachineAddresses(_ *types.Config, r types.Resolved, infraID, name string) ([]netip.Addr, error) {
	_, a, err := MachineAddress(r.MachineNetwork, infraID, name)
	if err != nil {
		return nil, err
	}
	return []netip.Addr{a}, nil
}

// addressAt returns the address off places after cidr's first; it must
// not be the block's last (broadcast) address.
func addressAt(cidr netip.Prefix, off int) (netip.Addr, error) {
	if !cidr.IsValid() {
		return netip.Addr{}, errors.New("no machine network: networking.machineNetwork[0] was not resolved")
	}
	a := cidr.Addr()
	for i := 0; i < off; i++ {
		a = a.Next()
	}
	if !cidr.Contains(a) || !cidr.Contains(a.Next()) {
		return netip.Addr{}, fmt.Errorf("machine network %s has no room for address offset %d", cidr, off)
	}
	return a, nil
}
