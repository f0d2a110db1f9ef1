package upgrade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Snapshotter is the part of an etcd client that takes a snapshot;
// *clientv3.Client has it.
type Snapshotter interface {
	SnapshotWithVersion(ctx context.Context) (*clientv3.SnapshotResponse, error)
}

// Snapshot saves a point-in-time snapshot of etcd, as `etcdctl snapshot
// save` would, to dir/upgrade/etcd-<label>-<UTC time>.db: 0600 (it holds
// every Secret of the cluster), written atomically and durably, following
// no link in dir. The stream ends with the SHA-256 of what precedes it
// (etcd's integrity check, which `etcdutl snapshot restore` verifies too);
// Snapshot checks it before the file takes its name, so a file there is
// whole. It returns the file's path and size.
func Snapshot(ctx context.Context, c Snapshotter, dir, label string, now time.Time) (string, int64, error) {
	resp, err := c.SnapshotWithVersion(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer resp.Snapshot.Close()
	name := filepath.Join(dir, installdir.UpgradeSnapshots, fmt.Sprintf("etcd-%s-%s.db", label, now.UTC().Format("20060102T150405Z")))
	var size int64
	w := &atomicfile.Writer{Root: dir}
	err = w.WriteFunc(name, 0o600, func(out io.Writer) error {
		v := newTrailerCheck()
		n, err := io.Copy(io.MultiWriter(out, v), resp.Snapshot)
		if err != nil {
			return err
		}
		size = n
		return v.verify()
	})
	if err != nil {
		return "", 0, fmt.Errorf("etcd snapshot %s: %w", name, err)
	}
	return name, size, nil
}

// trailerCheck hashes a stream but for its last sha256.Size bytes, which
// it keeps to compare with the hash.
type trailerCheck struct {
	h    hash.Hash
	tail []byte
}

func newTrailerCheck() *trailerCheck { return &trailerCheck{h: sha256.New()} }

// Write hashes what is no longer among the last sha256.Size bytes seen.
func (t *trailerCheck) Write(p []byte) (int, error) {
	t.tail = append(t.tail, p...)
	if extra := len(t.tail) - sha256.Size; extra > 0 {
		t.h.Write(t.tail[:extra])
		t.tail = append(t.tail[:0], t.tail[extra:]...)
	}
	return len(p), nil
}

// errSnapshotHash is a snapshot whose end is not the hash of its data.
var errSnapshotHash = errors.New("the snapshot's SHA-256 does not match its data (cut short or corrupted)")

// verify compares the hash of the data with the trailer.
func (t *trailerCheck) verify() error {
	if len(t.tail) < sha256.Size || !bytes.Equal(t.h.Sum(nil), t.tail) {
		return errSnapshotHash
	}
	return nil
}
