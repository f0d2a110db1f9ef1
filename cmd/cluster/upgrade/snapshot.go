package upgrade

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Snapshot saves a point-in-time snapshot of etcd, as `etcdctl snapshot
// save` would, to dir/upgrade/etcd-<label>-<UTC time>.db: 0600 (it holds
// every Secret of the cluster), written atomically and durably, following
// no link in dir. Its integrity check (etcdmembers.SaveSnapshot) passes
// before the file takes its name, so a file there is whole. It returns
// the file's path and size.
func Snapshot(ctx context.Context, c etcdmembers.Snapshotter, dir, label string, now time.Time) (string, int64, error) {
	name := filepath.Join(dir, installdir.UpgradeSnapshots, fmt.Sprintf("etcd-%s-%s.db", label, now.UTC().Format("20060102T150405Z")))
	var size int64
	w := &atomicfile.Writer{Root: dir}
	err := w.WriteFunc(name, 0o600, func(out io.Writer) error {
		var err error
		size, err = etcdmembers.SaveSnapshot(ctx, c, out)
		return err
	})
	if err != nil {
		return "", 0, fmt.Errorf("etcd snapshot %s: %w", name, err)
	}
	return name, size, nil
}
