package manifests

import (
	"context"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*CSRApprover)(nil)

const csrApproverTemplate = "cluster/12-csr-approver.yaml"

// CSRApprover is manifests/12-csr-approver.yaml: the Deployment that runs
// `kiln node csr-approver` on a master, with its ServiceAccount and the RBAC
// to approve kubelet serving CSRs (signer kubernetes.io/kubelet-serving) only
// and to read the machine inventory (Machines). Its --deny-* flags name
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
	c := ic.Config
	var ips, cidrs []string
	if vip := c.APIVIP(); vip != "" {
		ips = append(ips, vip)
	}
	cidrs = append(cidrs, c.Networking.ServiceNetwork...)
	for _, n := range c.Networking.ClusterNetwork {
		cidrs = append(cidrs, n.CIDR)
	}
	return m.generate(p, csrApproverTemplate, func(v *Values) any {
		return struct {
			*Values
			APIName            string
			DenyIPs, DenyCIDRs []string
		}{v, c.APIName(), ips, cidrs}
	})
}

// Load implements graph.WritableAsset.
func (m *CSRApprover) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, csrApproverTemplate)
}
