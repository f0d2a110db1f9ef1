package installconfig

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// Bounds of the address plan.
const (
	// maxHostPrefix keeps a node's pod block big enough for kubelet's
	// default 110 pods (a /25 has 126 usable addresses).
	maxHostPrefix = 25
	// minServicePrefix is the largest service network kube-apiserver
	// accepts (--service-cluster-ip-range: at most 20 host bits).
	minServicePrefix = 12
	// maxServicePrefix keeps at least 254 Service addresses for add-ons
	// and workloads.
	maxServicePrefix = 24
)

// namedPrefix is a parsed CIDR with the field it came from.
type namedPrefix struct {
	path   *field.Path
	prefix netip.Prefix
}

func validateNetworking(c *types.Config) field.ErrorList {
	np := field.NewPath("networking")
	n := c.Networking
	if n == nil {
		return field.ErrorList{field.Required(np, "")}
	}
	var errs field.ErrorList
	if !slices.Contains(types.NetworkTypes(), n.NetworkType) {
		errs = append(errs, field.NotSupported(np.Child("networkType"), n.NetworkType, types.NetworkTypes()))
	}
	if !slices.Contains(types.Egresses(), n.Egress) {
		errs = append(errs, field.NotSupported(np.Child("egress"), n.Egress, types.Egresses()))
	}
	// Every machine needs a pod block; the bootstrap machine is one more.
	nodes := c.MasterReplicas() + c.WorkerReplicas() + 1
	var all []namedPrefix
	var blocks uint64
	cnp := np.Child("clusterNetwork")
	if len(n.ClusterNetwork) == 0 {
		errs = append(errs, field.Required(cnp, "at least one pod address block"))
	}
	for i, e := range n.ClusterNetwork {
		p := cnp.Index(i).Child("cidr")
		pfx, perrs := parseCIDR(e.CIDR, p)
		errs = append(errs, perrs...)
		if !pfx.IsValid() {
			continue
		}
		all = append(all, namedPrefix{p, pfx})
		hp := cnp.Index(i).Child("hostPrefix")
		switch {
		case int(e.HostPrefix) < pfx.Bits():
			errs = append(errs, field.Invalid(hp, int64(e.HostPrefix),
				fmt.Sprintf("must be at least the prefix length of %s (%d)", e.CIDR, pfx.Bits())))
		case e.HostPrefix > maxHostPrefix:
			errs = append(errs, field.Invalid(hp, int64(e.HostPrefix),
				fmt.Sprintf("must be at most %d so each node's block holds kubelet's 110 pods", maxHostPrefix)))
		default:
			blocks += uint64(1) << min(int(e.HostPrefix)-pfx.Bits(), 32)
		}
	}
	if blocks > 0 && blocks < uint64(nodes) {
		errs = append(errs, field.Invalid(cnp.Index(0).Child("hostPrefix"), int64(n.ClusterNetwork[0].HostPrefix),
			fmt.Sprintf("the cluster network has room for %d nodes; the pools and the bootstrap machine need %d", blocks, nodes)))
	}
	snp := np.Child("serviceNetwork")
	switch {
	case len(n.ServiceNetwork) == 0:
		errs = append(errs, field.Required(snp, "one Service address block"))
	case len(n.ServiceNetwork) > 1:
		errs = append(errs, field.TooMany(snp, len(n.ServiceNetwork), 1))
	}
	if len(n.ServiceNetwork) > 0 {
		p := snp.Index(0)
		pfx, perrs := parseCIDR(n.ServiceNetwork[0], p)
		errs = append(errs, perrs...)
		if pfx.IsValid() {
			all = append(all, namedPrefix{p, pfx})
			if pfx.Bits() < minServicePrefix || pfx.Bits() > maxServicePrefix {
				errs = append(errs, field.Invalid(p, n.ServiceNetwork[0],
					fmt.Sprintf("must be between a /%d and a /%d", minServicePrefix, maxServicePrefix)))
			}
		}
	}
	mnp := np.Child("machineNetwork")
	if len(n.MachineNetwork) == 0 {
		errs = append(errs, field.Required(mnp, "at least one machine address block"))
	}
	var machineAddrs uint64
	for i, e := range n.MachineNetwork {
		p := mnp.Index(i).Child("cidr")
		pfx, perrs := parseCIDR(e.CIDR, p)
		errs = append(errs, perrs...)
		if pfx.IsValid() {
			all = append(all, namedPrefix{p, pfx})
			machineAddrs += (uint64(1) << min(32-pfx.Bits(), 32)) - 2
		}
	}
	if machineAddrs > 0 && machineAddrs < uint64(nodes) {
		errs = append(errs, field.Invalid(mnp.Index(0).Child("cidr"), n.MachineNetwork[0].CIDR,
			fmt.Sprintf("has room for %d machines; the pools and the bootstrap machine need %d", machineAddrs, nodes)))
	}
	return append(errs, overlaps(all)...)
}

// parseCIDR parses an IPv4 block written in canonical form.
func parseCIDR(s string, p *field.Path) (netip.Prefix, field.ErrorList) {
	pfx, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, field.ErrorList{field.Invalid(p, s, "must be a CIDR block such as 10.0.0.0/16")}
	case !pfx.Addr().Is4():
		return netip.Prefix{}, field.ErrorList{field.Invalid(p, s, "must be an IPv4 block; IPv6 is not supported yet")}
	case pfx != pfx.Masked():
		return netip.Prefix{}, field.ErrorList{field.Invalid(p, s,
			fmt.Sprintf("has host bits set; did you mean %s?", pfx.Masked()))}
	}
	return pfx, nil
}

// overlaps reports each block that overlaps an earlier one.
func overlaps(all []namedPrefix) field.ErrorList {
	var errs field.ErrorList
	for j := range all {
		for i := range j {
			if all[i].prefix.Overlaps(all[j].prefix) {
				errs = append(errs, field.Invalid(all[j].path, all[j].prefix.String(), "overlaps "+all[i].path.String()))
			}
		}
	}
	return errs
}
