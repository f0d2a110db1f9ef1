package tls

import "github.com/kiln-project/kiln/graph"

// Assets returns a zero value of every file-backed asset of this package, CAs
// first: the TLS part of a target, and what Ignition configs draw from.
func Assets() []graph.WritableAsset {
	return []graph.WritableAsset{
		&RootCA{},
		&EtcdCA{},
		&FrontProxyCA{},
		&KubeletServingCA{},
		&APIServer{},
		&APIServerKubeletClient{},
		&APIServerEtcdClient{},
		&EtcdServer{},
		&FrontProxyClient{},
		&AdminClient{},
		&KubeControllerManagerClient{},
		&KubeSchedulerClient{},
		&MachineConfigServer{},
		&ServiceAccountKeyPair{},
	}
}
