package manifests

import (
	"context"
	"fmt"
	"strings"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.Asset = (*Values)(nil)

// ClusterDNSDomain is the cluster's internal DNS domain for Services; it is
// the domain of the kube-apiserver certificate's in-cluster names.
const ClusterDNSDomain = tls.ServiceDNSDomain

// Images are the image references the templates use.
type Images struct {
	Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, KubeProxy, CoreDNS, Pause string
	LocalPathProvisioner, MetricsServer, KubeRouter, MetalLB                             string
}

// Values is everything the manifest templates read, computed once from the
// install-config. It is an asset so templates render from one consistent
// set of values and `kiln graph` shows where they come from.
type Values struct {
	ClusterName   string
	ClusterDomain string
	APIIntName    string
	// InternalAPI is host:port where the nodes reach the API
	// (kubeconfig.InternalAPI).
	InternalAPI string
	InfraID     string
	Platform    string
	NetworkType string
	// Egress is networking.egress resolved: NAT or None.
	Egress            string
	ClusterCIDRs      string
	NodeCIDRMaskSize  int32
	ServiceCIDR       string
	DNSServiceIP      string
	ClusterDNSDomain  string
	MasterReplicas    int
	WorkerReplicas    int
	CoreDNSReplicas   int
	KubernetesVersion string
	KubeletAPIGroup   string
	// BootstrapAutoApproval keeps kube-controller-manager's approval of
	// every node client CSR made with a bootstrap token: on a platform that
	// assigns no machine addresses kiln keeps no machine inventory, so its
	// approver cannot tell which names a token may claim.
	BootstrapAutoApproval bool
	// FrontProxyClientCN is the CN the API server accepts request headers from.
	FrontProxyClientCN string
	// SlowerControlPlane is controlPlaneHardwareSpeed Slower: etcd's
	// slower timing and the API servers' longer etcd checks.
	SlowerControlPlane bool
	// AddonsOnMasters lets CoreDNS, metrics-server and the local-path
	// provisioner run on the masters (they tolerate the masters' taint): a
	// cluster without workers needs them there. Under Slower with workers
	// they wait for the workers, which join once the bootstrap machine is
	// gone, so that the masters spend their CPU on the handover.
	AddonsOnMasters bool
	Images          Images
	// Addons are the optional add-ons the cluster gets.
	Addons types.Addons
	// Backup is install-config's backup, its keep defaulted; nil when
	// the cluster takes no backups by itself. (Omitted when nil, so the
	// values of a cluster made before it existed are unchanged.)
	Backup *types.Backup `json:",omitempty"`
}

// ID implements graph.Asset.
func (*Values) ID() string { return "manifests/values" }

// Name implements graph.Asset.
func (*Values) Name() string { return "manifest template values" }

// Dependencies implements graph.Asset.
func (*Values) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &clusterid.ClusterID{}, &tls.FrontProxyClient{}}
}

// Generate implements graph.Asset.
func (v *Values) Generate(_ context.Context, p graph.Parents) error {
	ic, cid, fp := &installconfig.InstallConfig{}, &clusterid.ClusterID{}, &tls.FrontProxyClient{}
	if err := p.Get(ic, cid, fp); err != nil {
		return err
	}
	fpCert, err := fp.Certificate()
	if err != nil {
		return fmt.Errorf("front-proxy client certificate: %w", err)
	}
	c := ic.Config
	var cidrs []string
	for _, n := range c.Networking.ClusterNetwork {
		cidrs = append(cidrs, n.CIDR)
	}
	if len(cidrs) == 0 || len(c.Networking.ServiceNetwork) == 0 {
		return fmt.Errorf("install-config has no cluster or service network after defaulting")
	}
	coreDNS := 2
	if c.MasterReplicas()+c.WorkerReplicas() < 2 {
		coreDNS = 1
	}
	res, err := ic.Resolved()
	if err != nil {
		return err
	}
	rel := res.Release
	*v = Values{
		ClusterName:           c.Metadata.Name,
		ClusterDomain:         c.ClusterDomain(),
		APIIntName:            c.APIIntName(),
		InternalAPI:           kubeconfig.InternalAPI(c),
		InfraID:               cid.InfraID,
		Platform:              c.PlatformName(),
		NetworkType:           c.Networking.NetworkType,
		Egress:                res.Egress,
		ClusterCIDRs:          strings.Join(cidrs, ","),
		NodeCIDRMaskSize:      c.Networking.ClusterNetwork[0].HostPrefix,
		ServiceCIDR:           c.Networking.ServiceNetwork[0],
		DNSServiceIP:          res.DNSServiceIP().String(),
		ClusterDNSDomain:      ClusterDNSDomain,
		MasterReplicas:        c.MasterReplicas(),
		WorkerReplicas:        c.WorkerReplicas(),
		CoreDNSReplicas:       coreDNS,
		KubernetesVersion:     rel.Kubernetes,
		KubeletAPIGroup:       tls.KubeletAPIGroup,
		BootstrapAutoApproval: !installconfig.AssignsMachineAddresses(c),
		FrontProxyClientCN:    fpCert.Subject.CommonName,
		SlowerControlPlane:    c.SlowerControlPlane(),
		AddonsOnMasters:       !c.SlowerControlPlane() || c.WorkerReplicas() == 0,
		Images: Images{
			Etcd:                  rel.Image(release.Etcd),
			KubeAPIServer:         rel.Image(release.KubeAPIServer),
			KubeControllerManager: rel.Image(release.KubeControllerManager),
			KubeScheduler:         rel.Image(release.KubeScheduler),
			KubeProxy:             rel.Image(release.KubeProxy),
			CoreDNS:               rel.Image(release.CoreDNS),
			Pause:                 rel.Image(release.Pause),
			LocalPathProvisioner:  rel.Image(release.LocalPathProvisioner),
			MetricsServer:         rel.Image(release.MetricsServer),
			KubeRouter:            rel.Image(release.KubeRouter),
			MetalLB:               rel.Image(release.MetalLB),
		},
		Addons: configs.Addons(c),
	}
	if c.Backup != nil {
		b := *c.Backup
		if b.Keep == 0 {
			b.Keep = types.DefaultBackupKeep
		}
		v.Backup = &b
	}
	return nil
}
