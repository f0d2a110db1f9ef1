package provision

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/local/localconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
)

// Plan is the local platform's layout of one cluster.
type Plan struct {
	Bridge    string
	CIDR      netip.Prefix
	VIP       netip.Addr
	Bootstrap netip.Addr
	Masters   []netip.Addr
	Workers   []netip.Addr
	// MasterNames and WorkerNames name the machines at Masters and
	// Workers, in the same order.
	MasterNames, WorkerNames []string
	// ServiceLB is the address pool of LoadBalancer Services; the zero
	// Pool when the loadBalancer add-on is off.
	ServiceLB servicelb.Pool
}

// BridgeName is the default bridge of infraID: "kiln-" and the infra ID's
// random suffix, within the 15 characters of an interface name.
func BridgeName(infraID string) string {
	suffix := infraID
	if i := strings.LastIndexByte(infraID, '-'); i >= 0 {
		suffix = infraID[i+1:]
	}
	if len(suffix) > 10 {
		suffix = suffix[:10]
	}
	return "kiln-" + suffix
}

// bridgeOf returns the bridge of the cluster infraID: platform.local's
// bridgeName, else BridgeName's default.
func bridgeOf(c *types.Config, infraID string) string {
	if c.Platform.Local != nil && c.Platform.Local.BridgeName != "" {
		return c.Platform.Local.BridgeName
	}
	return BridgeName(infraID)
}

// NewPlan lays out the machines of shape on c's machine network cidr
// (resolved, types.Resolved), with the addresses of
// localconfig.MachineAddress: a machine keeps its address whatever else is
// added or removed.
func NewPlan(c *types.Config, cidr netip.Prefix, infraID string, shape machines.Shape) (*Plan, error) {
	if c.Platform.Local == nil {
		return nil, errors.New("install-config has no local platform section after defaulting")
	}
	p := &Plan{Bridge: bridgeOf(c, infraID), CIDR: cidr}
	var err error
	if p.VIP, err = netip.ParseAddr(configs.APIVIP(c)); err != nil {
		return nil, fmt.Errorf("platform.local.apiVIP: %w", err)
	}
	if p.Bootstrap, err = localconfig.BootstrapAddress(cidr); err != nil {
		return nil, err
	}
	for _, role := range []struct {
		name  string
		names []string
		addrs *[]netip.Addr
	}{{machines.RoleMaster, shape.Masters, &p.Masters}, {machines.RoleWorker, shape.Workers, &p.Workers}} {
		for _, n := range role.names {
			r, a, err := localconfig.MachineAddress(cidr, infraID, n)
			if err != nil {
				return nil, err
			}
			if r != role.name {
				return nil, fmt.Errorf("machine name %q is not a %s of %s", n, role.name, infraID)
			}
			*role.addrs = append(*role.addrs, a)
		}
	}
	p.MasterNames, p.WorkerNames = slices.Clone(shape.Masters), slices.Clone(shape.Workers)
	if configs.Addons(c).LoadBalancer {
		if err := p.reserveServiceLB(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// reserveServiceLB sets the LoadBalancer Service pool, which no machine
// address and not the API VIP may fall into.
func (p *Plan) reserveServiceLB() error {
	pool, err := servicelb.PoolFor(p.CIDR)
	if err != nil {
		return fmt.Errorf("platform.local.addons.loadBalancer: %w", err)
	}
	all := append(append([]netip.Addr{p.VIP, p.Bootstrap}, p.Masters...), p.Workers...)
	for _, a := range all {
		if pool.Contains(a) {
			return fmt.Errorf("platform.local.addons.loadBalancer: address %s of the cluster is in the LoadBalancer Service pool %s "+
				"(the last quarter of %s): use fewer machines, a larger machine network, or set platform.local.addons.loadBalancer: false",
				a, pool, p.CIDR)
		}
	}
	p.ServiceLB = pool
	return nil
}

// Vars returns the Terraform variables of every stage.
func (p *Plan) Vars(c *platforms.Cluster, nodeImage, kiln string) tfdata.LocalVars {
	cfg := c.Config
	v := tfdata.LocalVars{
		ClusterName:       cfg.Metadata.Name,
		BaseDomain:        cfg.BaseDomain,
		InfraID:           c.InfraID,
		Bridge:            p.Bridge,
		MachineCIDR:       p.CIDR.String(),
		ServiceNetwork:    cfg.Networking.ServiceNetwork,
		APIVIP:            p.VIP.String(),
		NodeImage:         nodeImage,
		KilnBinary:        kiln,
		BootstrapIgnition: string(c.Bootstrap),
		MasterIgnition:    string(c.Master),
		WorkerIgnition:    string(c.Worker),
		BootstrapAddress:  p.Bootstrap.String(),
		BootstrapInLB:     true,
		MasterNames:       p.MasterNames,
		MasterAddresses:   addrStrings(p.Masters),
		WorkerNames:       p.WorkerNames,
		WorkerAddresses:   addrStrings(p.Workers),
		EgressNAT:         c.Resolved.NAT(),
	}
	m, wp := machinePools(cfg)
	v.BootstrapCPUs, v.BootstrapMemoryMiB = m.CPUs, m.MemoryMiB
	v.MasterCPUs, v.MasterMemoryMiB = m.CPUs, m.MemoryMiB
	v.WorkerCPUs, v.WorkerMemoryMiB = wp.CPUs, wp.MemoryMiB
	return v
}

// machinePools returns the sizes of the masters (and the bootstrap
// machine) and of the workers: a pool's own local section, else the
// platform's default, else no limits.
func machinePools(cfg *types.Config) (master, worker local.MachinePool) {
	pool := func(mp *types.MachinePool) local.MachinePool {
		if mp != nil && mp.Platform.Local != nil {
			return *mp.Platform.Local
		}
		if cfg.Platform.Local != nil && cfg.Platform.Local.DefaultMachinePlatform != nil {
			return *cfg.Platform.Local.DefaultMachinePlatform
		}
		return local.MachinePool{}
	}
	var w *types.MachinePool
	if len(cfg.Compute) > 0 {
		w = &cfg.Compute[0]
	}
	return pool(cfg.ControlPlane), pool(w)
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}
