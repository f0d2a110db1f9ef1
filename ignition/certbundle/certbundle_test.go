package certbundle

import (
	"strings"
	"testing"
)

func TestRenewable(t *testing.T) {
	for p, want := range map[string]bool{
		"/etc/kubernetes/pki/apiserver.crt":                        true,
		"/etc/kubernetes/pki/apiserver.key":                        true,
		"/etc/kubernetes/pki/etcd/peer.key":                        true,
		"/etc/kubernetes/kubeconfigs/scheduler.kubeconfig":         true,
		"/etc/kiln/mcs/tls.key":                                    true,
		"/etc/kubernetes/pki/ca.key":                               false,
		"/etc/kubernetes/pki/etcd/ca.crt":                          false,
		"/etc/kubernetes/pki/kubelet-serving-ca.key":               false,
		"/etc/kubernetes/pki/front-proxy-ca.crt":                   false,
		"/etc/kubernetes/pki/client-ca.crt":                        false,
		"/etc/kubernetes/pki/sa.key":                               false,
		"/etc/kubernetes/pki/../manifests/kube-apiserver.yaml.crt": false,
		"/etc/kubernetes/manifests/kube-apiserver.yaml":            false,
		"/etc/kiln/mcs/worker.ign":                                 false,
		"etc/kubernetes/pki/apiserver.crt":                         false,
		"/root/.ssh/authorized_keys":                               false,
	} {
		if got := Renewable(p); got != want {
			t.Errorf("Renewable(%s) = %v, want %v", p, got, want)
		}
	}
	b := Bundle{Run: "bad name\n", Files: []File{{Path: "/etc/kubernetes/pki/ca.key"}, {Path: "/etc/kubernetes/pki/apiserver.crt"}}}
	err := b.Check()
	if err == nil || !strings.Contains(err.Error(), "run ") || !strings.Contains(err.Error(), "ca.key") || strings.Contains(err.Error(), "apiserver.crt") {
		t.Errorf("Check() = %v; want the name and ca.key named, apiserver.crt not", err)
	}
}
