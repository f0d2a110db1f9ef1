package manifests

import (
	"context"
	"net/netip"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*CSRApprover)(nil)

const csrApproverTemplate = "cluster/12-csr-approver.yaml"

// CSRApprover is manifests/12-csr-approver.yaml: the Deployment that runs
// `kiln node csr-approver` on a master, with its ServiceAccount and the RBAC
// to approve kubelet serving CSRs (signer kubernetes.io/kubelet-serving) only
// and to read the machine inventory (Machines). Its --deny-* flags
// (CSRApproverDenyFlags, which the bootstrap machine's unit shares) name
// what no kubelet serving certificate may carry, whatever the inventory
// says: the API's names and VIP, the Service and pod networks and the
// cluster's DNS domain.
type CSRApprover struct{ objects }

// ID implements graph.Asset.
func (*CSRApprover) ID() string { return "manifests/csr-approver" }

// Name implements graph.Asset.
func (*CSRApprover) Name() string { return "kubelet serving CSR approver manifest" }

// Dependencies implements graph.Asset.
func (*CSRApprover) Dependencies() []graph.Asset { return valuesOnly(&installconfig.InstallConfig{}) }

// Generate implements graph.Asset.
func (m *CSRApprover) Generate(_ context.Context, p graph.Parents) error {
	ic := &installconfig.InstallConfig{}
	if err := p.Get(ic); err != nil {
		return err
	}
	flags := CSRApproverDenyFlags(ic.Config)
	return m.generate(p, csrApproverTemplate, func(v *Values) any {
		return struct {
			*Values
			DenyFlags []string
		}{v, flags}
	})
}

// CSRApproverDenyFlags are the --deny-* flags of `kiln node csr-approver`
// for the cluster of c, the same for the Deployment and the bootstrap
// machine's unit: the API's names and VIP, the cluster's DNS domain, and
// the Service and pod networks, which no kubelet serving certificate may
// name whatever the machine inventory says. An API VIP that is a
// machine's own address (configs.APIVIPIsMachine: an ssh master's, where
// no load balancer stands before the masters) is that machine's to name,
// as the inventory lists it: refusing it would leave that master without
// a serving certificate, and `kubectl logs` of its pods failing. A VIP
// that is a DNS name is refused as a name.
func CSRApproverDenyFlags(c *types.Config) []string {
	flags := []string{"--deny-name=" + c.APIName(), "--deny-name=" + c.APIIntName(), "--deny-domain=" + ClusterDNSDomain}
	if vip := configs.APIVIP(c); vip != "" && !configs.APIVIPIsMachine(c) {
		if _, err := netip.ParseAddr(vip); err == nil {
			flags = append(flags, "--deny-ip="+vip)
		} else {
			flags = append(flags, "--deny-name="+vip)
		}
	}
	if c.Networking == nil {
		return flags
	}
	for _, n := range c.Networking.ServiceNetwork {
		flags = append(flags, "--deny-cidr="+n)
	}
	for _, n := range c.Networking.ClusterNetwork {
		flags = append(flags, "--deny-cidr="+n.CIDR)
	}
	return flags
}

// Load implements graph.WritableAsset.
func (m *CSRApprover) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, csrApproverTemplate)
}
