package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*LocalPathStorage)(nil)

const localPathStorageTemplate = "cluster/13-local-path-storage.yaml"

// LocalPathStorage is manifests/13-local-path-storage.yaml: the default
// StorageClass "standard" and rancher's local-path-provisioner, which
// provisions node-local hostPath volumes under /var/lib/kiln/local-path. It
// holds no file when the install-config switches the storage add-on off.
type LocalPathStorage struct{ objects }

// ID implements graph.Asset.
func (*LocalPathStorage) ID() string { return "manifests/local-path-storage" }

// Name implements graph.Asset.
func (*LocalPathStorage) Name() string {
	return "default StorageClass (local-path-provisioner) manifest"
}

// Dependencies implements graph.Asset.
func (*LocalPathStorage) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (m *LocalPathStorage) Generate(_ context.Context, p graph.Parents) error {
	return m.generateIf(p, localPathStorageTemplate, func(v *Values) bool { return v.Addons.Storage })
}

// Load implements graph.WritableAsset.
func (m *LocalPathStorage) Load(f graph.FileFetcher) (bool, error) {
	return m.loadOne(f, localPathStorageTemplate)
}
