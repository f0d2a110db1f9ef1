package ignitionconfigs

import "github.com/kiln-project/kiln/ignition/nodelayout"

// Which of --dir's TLS files each role gets, and where. Keys (0600) go only
// where they are used: the root CA key and the kubelet serving CA key to the
// bootstrap machine and masters (kube-controller-manager signs kubelet client
// certificates with the first, kubelet serving certificates with the
// second; it reads both from copies of its own, nodelayout.SigningCA and
// SigningKubeletServingCA, which stay one certificate while a CA rotation
// makes the trust files bundles), the etcd CA key only to the bootstrap machine (it issues every
// etcd member's certificates), the front-proxy CA key nowhere; with
// pki.renewal Automatic (the default) the etcd and front-proxy CA keys go to
// the masters too, whose renewal timer issues the leaves they sign again
// (renewalPKI).

func cert(name, dest string) placement { return placement{"tls/" + name + ".crt", dest, 0o644} }
func key(name, dest string) placement  { return placement{"tls/" + name + ".key", dest, 0o600} }

// controlPlanePKI is what kube-apiserver and kube-controller-manager read on
// the bootstrap machine and on masters.
func controlPlanePKI() []placement {
	return []placement{
		cert("root-ca", nodelayout.PKIDir+"/ca.crt"),
		key("root-ca", nodelayout.PKIDir+"/ca.key"),
		cert("root-ca", nodelayout.PKIDir+"/client-ca.crt"),
		cert("kubelet-serving-ca", nodelayout.PKIDir+"/kubelet-serving-ca.crt"),
		key("kubelet-serving-ca", nodelayout.PKIDir+"/kubelet-serving-ca.key"),
		cert("root-ca", nodelayout.SigningCA+".crt"),
		key("root-ca", nodelayout.SigningCA+".key"),
		cert("kubelet-serving-ca", nodelayout.SigningKubeletServingCA+".crt"),
		key("kubelet-serving-ca", nodelayout.SigningKubeletServingCA+".key"),
		cert("apiserver", nodelayout.PKIDir+"/apiserver.crt"),
		key("apiserver", nodelayout.PKIDir+"/apiserver.key"),
		cert("apiserver-etcd-client", nodelayout.PKIDir+"/apiserver-etcd-client.crt"),
		key("apiserver-etcd-client", nodelayout.PKIDir+"/apiserver-etcd-client.key"),
		cert("apiserver-kubelet-client", nodelayout.PKIDir+"/apiserver-kubelet-client.crt"),
		key("apiserver-kubelet-client", nodelayout.PKIDir+"/apiserver-kubelet-client.key"),
		cert("front-proxy-ca", nodelayout.PKIDir+"/front-proxy-ca.crt"),
		cert("front-proxy-client", nodelayout.PKIDir+"/front-proxy-client.crt"),
		key("front-proxy-client", nodelayout.PKIDir+"/front-proxy-client.key"),
		{"tls/service-account.key", nodelayout.PKIDir + "/sa.key", 0o600},
		{"tls/service-account.pub", nodelayout.PKIDir + "/sa.pub", 0o644},
		cert("etcd-ca", nodelayout.EtcdPKIDir+"/ca.crt"),
		cert("machine-config-server", nodelayout.MCSConfigDir+"/tls.crt"),
		key("machine-config-server", nodelayout.MCSConfigDir+"/tls.key"),
	}
}

// bootstrapOnlyPKI is the etcd CA key.
func bootstrapOnlyPKI() []placement {
	return []placement{key("etcd-ca", nodelayout.EtcdPKIDir+"/ca.key")}
}

// renewalPKI is what a master's automatic renewal needs besides
// controlPlanePKI: the keys of the CAs that sign its etcd members' and
// the API server's etcd and front-proxy client certificates.
func renewalPKI() []placement {
	return []placement{
		key("etcd-ca", nodelayout.EtcdPKIDir+"/ca.key"),
		key("front-proxy-ca", nodelayout.PKIDir+"/front-proxy-ca.key"),
	}
}

// workerPKI is the CA kubelets verify clients with.
func workerPKI() []placement {
	return []placement{cert("root-ca", nodelayout.PKIDir+"/ca.crt")}
}
