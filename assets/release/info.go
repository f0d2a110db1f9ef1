package release

// Info is the release as data: what the node image records in
// /etc/kiln/release.json and what `kiln build node-image` reports.
type Info struct {
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd"`
	CoreDNS    string `json:"coredns"`
	Pause      string `json:"pause"`
	// LocalPathProvisioner and MetricsServer are the add-ons' versions.
	LocalPathProvisioner string `json:"localPathProvisioner"`
	MetricsServer        string `json:"metricsServer"`
	// KubeRouter is the NetworkPolicy engine's version.
	KubeRouter string `json:"kubeRouter"`
	// MetalLB is the ssh platform's LoadBalancer add-on's version.
	MetalLB string `json:"metallb"`
	// Containerd and Runc are the container runtime's versions.
	Containerd string            `json:"containerd"`
	Runc       string            `json:"runc"`
	Debian     string            `json:"debian"`
	Images     map[string]string `json:"images"`
}

// Info returns r as data.
func (r Release) Info() Info {
	info := Info{
		Kubernetes:           r.Kubernetes,
		Etcd:                 r.Etcd,
		CoreDNS:              r.CoreDNS,
		Pause:                PauseVersion,
		LocalPathProvisioner: LocalPathProvisionerVersion,
		MetricsServer:        MetricsServerVersion,
		KubeRouter:           KubeRouterVersion,
		MetalLB:              MetalLBVersion,
		Containerd:           ContainerdVersion,
		Runc:                 RuncVersion,
		Debian:               DebianSuite,
		Images:               map[string]string{},
	}
	for _, s := range r.Images() {
		info.Images[string(s.Component)] = s.Ref()
	}
	return info
}
