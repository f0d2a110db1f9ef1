package manifests

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeletServingCABundle)(nil)

// Where the kubelet serving CA's certificate is published.
const (
	// KubeletServingCAConfigMap is the ConfigMap, in kube-system.
	KubeletServingCAConfigMap = "kiln-kubelet-serving-ca"
	// KubeletServingCAKey is its data key.
	KubeletServingCAKey = "ca.crt"
	// kubeletServingCAPath is the file of KubeletServingCABundle.
	kubeletServingCAPath = ManifestsDir + "/06-kubelet-serving-ca.yaml"
)

// KubeletServingCABundle is manifests/06-kubelet-serving-ca.yaml: the
// certificate (never the key) of tls.KubeletServingCA as ConfigMap
// kube-system/kiln-kubelet-serving-ca, key ca.crt, for the clients of
// kubelets in the cluster (metrics-server). Clients of the API server get the
// root CA instead, which does not sign kubelet serving certificates.
type KubeletServingCABundle struct{ fileSet }

// ID implements graph.Asset.
func (*KubeletServingCABundle) ID() string { return "manifests/kubelet-serving-ca" }

// Name implements graph.Asset.
func (*KubeletServingCABundle) Name() string { return "kubelet serving CA bundle manifest" }

// Dependencies implements graph.Asset.
func (*KubeletServingCABundle) Dependencies() []graph.Asset {
	return []graph.Asset{&tls.KubeletServingCA{}}
}

// Generate implements graph.Asset.
func (m *KubeletServingCABundle) Generate(_ context.Context, p graph.Parents) error {
	ca := &tls.KubeletServingCA{}
	if err := p.Get(ca); err != nil {
		return err
	}
	data, err := yaml.Marshal(&corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: KubeletServingCAConfigMap, Namespace: "kube-system",
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kiln"}},
		Data: map[string]string{KubeletServingCAKey: string(ca.Cert)},
	})
	if err != nil {
		return err
	}
	m.FileList = []*graph.File{{Path: kubeletServingCAPath, Data: data}}
	return nil
}

// Load implements graph.WritableAsset.
func (m *KubeletServingCABundle) Load(f graph.FileFetcher) (bool, error) {
	return m.load(f, []string{kubeletServingCAPath}, CheckObjects)
}
