package etcdmembers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshotter is the part of an etcd client that takes a snapshot;
// *clientv3.Client has it.
type Snapshotter interface {
	SnapshotWithVersion(ctx context.Context) (*clientv3.SnapshotResponse, error)
}

// ErrSnapshotHash is a snapshot whose end is not the hash of its data.
var ErrSnapshotHash = errors.New("the snapshot's SHA-256 does not match its data (cut short or corrupted)")

// SaveSnapshot streams a point-in-time snapshot of etcd from c into w, as
// `etcdctl snapshot save` does. The stream ends with the SHA-256 of what
// precedes it (etcd's integrity check, which `etcdutl snapshot restore`
// verifies too): SaveSnapshot checks it once the stream ends and returns
// ErrSnapshotHash when it does not match, so a caller writes w to a
// temporary file and names it only when SaveSnapshot succeeds. It
// returns the size written, the trailer included; the caller names the
// snapshot in its errors.
func SaveSnapshot(ctx context.Context, c Snapshotter, w io.Writer) (int64, error) {
	resp, err := c.SnapshotWithVersion(ctx)
	if err != nil {
		return 0, err
	}
	defer resp.Snapshot.Close()
	v := NewSnapshotCheck()
	n, err := io.Copy(io.MultiWriter(w, v), resp.Snapshot)
	if err != nil {
		return n, err
	}
	return n, v.Verify()
}

// SnapshotCheck checks a snapshot streamed into it, as it is saved or
// read back: it hashes the stream but for its last sha256.Size bytes,
// which it keeps to compare with the hash (Verify).
type SnapshotCheck struct {
	h    hash.Hash
	tail []byte
}

// NewSnapshotCheck returns a SnapshotCheck that has seen nothing.
func NewSnapshotCheck() *SnapshotCheck { return &SnapshotCheck{h: sha256.New()} }

// Write hashes what is no longer among the last sha256.Size bytes seen.
func (t *SnapshotCheck) Write(p []byte) (int, error) {
	t.tail = append(t.tail, p...)
	if extra := len(t.tail) - sha256.Size; extra > 0 {
		t.h.Write(t.tail[:extra])
		t.tail = append(t.tail[:0], t.tail[extra:]...)
	}
	return len(p), nil
}

// Verify returns ErrSnapshotHash unless what was written ends with the
// SHA-256 of what precedes it.
func (t *SnapshotCheck) Verify() error {
	if len(t.tail) < sha256.Size || !bytes.Equal(t.h.Sum(nil), t.tail) {
		return ErrSnapshotHash
	}
	return nil
}
