package ignitionconfigs_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/ignition"
)

// fileOf returns a file of c or fails.
func fileOf(t *testing.T, c types.Config, path string) []byte {
	t.Helper()
	data, ok, err := ignition.FileContents(c, path)
	if err != nil || !ok {
		t.Fatalf("no %s: %v", path, err)
	}
	return data
}

// flagOf returns the value of --name in a static pod's first container.
func flagOf(t *testing.T, manifest []byte, name string) string {
	t.Helper()
	var pod corev1.Pod
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		t.Fatal(err)
	}
	for _, arg := range pod.Spec.Containers[0].Command {
		if v, ok := strings.CutPrefix(arg, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// Kubelets that join rotate their client certificate and get their serving
// certificate from the kubelet serving CA, not the root CA; the API servers
// verify it with the CA that kube-controller-manager signs kubelet serving
// certificates with; the approver may approve kubelet serving and kubelet
// client CSRs only (never the generic client signer).
func TestKubeletCertificateRotation(t *testing.T) {
	boot := generatedBootstrap(t)
	master, worker := served(t, boot, "master"), served(t, boot, "worker")

	type kubeletConfig struct {
		RotateCertificates *bool `json:"rotateCertificates"`
		ServerTLSBootstrap *bool `json:"serverTLSBootstrap"`
	}
	for name, c := range map[string]types.Config{"bootstrap": boot, "master": master, "worker": worker} {
		var kc kubeletConfig
		if err := yaml.Unmarshal(fileOf(t, c, "/etc/kubernetes/kubelet.yaml"), &kc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		joins := name != "bootstrap" // the bootstrap kubelet is standalone: no API, nothing to rotate
		if got := kc.RotateCertificates != nil && *kc.RotateCertificates; got != joins {
			t.Errorf("%s: rotateCertificates = %v, want %v", name, got, joins)
		}
		if got := kc.ServerTLSBootstrap != nil && *kc.ServerTLSBootstrap; got != joins {
			t.Errorf("%s: serverTLSBootstrap = %v, want %v", name, got, joins)
		}
	}

	for name, paths := range map[string][2]string{
		"bootstrap": {"/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/manifests/kube-controller-manager.yaml"},
		"master":    {"/etc/kubernetes/staged-manifests/kube-apiserver.yaml", "/etc/kubernetes/staged-manifests/kube-controller-manager.yaml"},
	} {
		c := map[string]types.Config{"bootstrap": boot, "master": master}[name]
		ca := flagOf(t, fileOf(t, c, paths[0]), "kubelet-certificate-authority")
		signer := flagOf(t, fileOf(t, c, paths[1]), "cluster-signing-kubelet-serving-cert-file")
		// The signer reads a copy of its own (one certificate even while a
		// CA rotation makes the trust file a bundle) of the same CA.
		if ca == "" || signer == "" || !bytes.Equal(fileOf(t, c, ca), fileOf(t, c, signer)) {
			t.Errorf("%s: kube-apiserver --kubelet-certificate-authority=%q, kube-controller-manager signs kubelet serving certificates with %q", name, ca, signer)
			continue
		}
		if bytes.Equal(fileOf(t, c, ca), fileOf(t, c, "/etc/kubernetes/pki/client-ca.crt")) {
			t.Errorf("%s: %s is the root CA: a kubelet serving certificate would pass for the API server's", name, ca)
		}
	}

	// The approver's ClusterRole approves for the kubelet-serving signer only.
	docs := strings.Split(string(fileOf(t, boot, "/opt/kiln/manifests/12-csr-approver.yaml")), "\n---\n")
	var approve [][]string
	for _, d := range docs {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(d), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" {
			continue
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Verbs, "approve") || slices.Contains(r.Verbs, "*") {
				approve = append(approve, r.ResourceNames)
			}
		}
	}
	if want := []string{"kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet"}; len(approve) != 1 || !slices.Equal(approve[0], want) {
		t.Errorf("approve rules name signers %v, want only %v", approve, want)
	}
}
