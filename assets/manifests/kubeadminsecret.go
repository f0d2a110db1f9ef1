package manifests

import (
	"context"

	"github.com/kiln-project/kiln/assets/password"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*KubeadminSecret)(nil)

const kubeadminTemplate = "cluster/04-kubeadmin.yaml"

// KubeadminSecret is manifests/04-kubeadmin.yaml: the bcrypt hash of the
// kubeadmin password (the password itself never enters the cluster).
type KubeadminSecret struct{ objects }

// ID implements graph.Asset.
func (*KubeadminSecret) ID() string { return "manifests/kubeadmin" }

// Name implements graph.Asset.
func (*KubeadminSecret) Name() string { return "kubeadmin Secret manifest" }

// Dependencies implements graph.Asset.
func (*KubeadminSecret) Dependencies() []graph.Asset {
	return valuesOnly(&password.KubeadminPassword{})
}

// Generate implements graph.Asset.
func (m *KubeadminSecret) Generate(_ context.Context, p graph.Parents) error {
	pw := &password.KubeadminPassword{}
	if err := p.Get(pw); err != nil {
		return err
	}
	return m.generate(p, kubeadminTemplate, func(v *Values) any {
		return struct {
			*Values
			KubeadminPasswordHash string
		}{v, string(pw.PasswordHash)}
	})
}

// Load implements graph.WritableAsset.
func (m *KubeadminSecret) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, kubeadminTemplate)
}
