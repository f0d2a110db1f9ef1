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

// RenewableIDs returns the IDs of the leaf certificates that outlive the
// bootstrap machine, which `kiln certs renew` issues again from the same
// CAs: every certificate of Assets but the CAs, the bootstrap machine's
// etcd serving certificate and the service account key pair (a key, not
// a certificate).
func RenewableIDs() []string {
	return []string{
		(&APIServer{}).ID(),
		(&APIServerKubeletClient{}).ID(),
		(&APIServerEtcdClient{}).ID(),
		(&FrontProxyClient{}).ID(),
		(&AdminClient{}).ID(),
		(&KubeControllerManagerClient{}).ID(),
		(&KubeSchedulerClient{}).ID(),
		(&MachineConfigServer{}).ID(),
	}
}
