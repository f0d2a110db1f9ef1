package manifests

import "github.com/kiln-project/kiln/graph"

// Objects returns the assets of manifests/, in apply order: what bootkube
// applies on the bootstrap machine.
func Objects() []graph.WritableAsset {
	return []graph.WritableAsset{
		&Namespaces{}, &NodeBootstrapRBAC{}, &BootstrapTokenSecret{}, &ClusterConfig{},
		&Machines{}, &KubeletServingCABundle{}, &KubeProxy{}, &CoreDNS{}, &CSRApprover{}, &LocalPathStorage{}, &MetricsServer{}, &MetalLB{}, &NetworkPolicy{}, &EtcdBackup{}, &MachineConfig{},
	}
}

// Assets returns every asset of the manifests target: the objects, the
// manifests the user added and the static pods of both roles.
func Assets() []graph.WritableAsset {
	return append(Objects(), &UserManifests{}, &BootstrapStaticPods{}, &MasterStaticPods{})
}
