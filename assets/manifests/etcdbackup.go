package manifests

import (
	"context"

	"github.com/kiln-project/kiln/graph"
)

var (
	_ graph.WritableAsset = (*EtcdBackup)(nil)
	_ graph.Introduced    = (*EtcdBackup)(nil)
)

const etcdBackupTemplate = "cluster/16-etcd-backup.yaml"

// EtcdBackup is manifests/16-etcd-backup.yaml: the CronJob that takes the
// backups of install-config's backup.schedule on the masters (`kiln node
// etcd-backup`). It holds no file when the install-config schedules none.
type EtcdBackup struct{ objects }

// ID implements graph.Asset.
func (*EtcdBackup) ID() string { return "manifests/etcd-backup" }

// Name implements graph.Asset.
func (*EtcdBackup) Name() string { return "etcd backup CronJob manifest" }

// Dependencies implements graph.Asset.
func (*EtcdBackup) Dependencies() []graph.Asset { return valuesOnly() }

// Generate implements graph.Asset.
func (e *EtcdBackup) Generate(_ context.Context, p graph.Parents) error {
	return e.generateIf(p, etcdBackupTemplate, func(v *Values) bool { return v.Backup != nil })
}

// Load implements graph.WritableAsset.
func (e *EtcdBackup) Load(f graph.FileFetcher) (bool, error) {
	return e.loadOne(f, etcdBackupTemplate)
}

// Default implements graph.Introduced: the Ignition configs of a cluster
// made before this asset existed were made without backups.
func (e *EtcdBackup) Default() bool { return len(e.FileList) == 0 }
