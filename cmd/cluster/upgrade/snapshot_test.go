package upgrade

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
)

// fakeSnapshotter streams data, as etcd's Snapshot RPC does.
type fakeSnapshotter struct{ data []byte }

func (f fakeSnapshotter) SnapshotWithVersion(context.Context) (*clientv3.SnapshotResponse, error) {
	return &clientv3.SnapshotResponse{Snapshot: io.NopCloser(strings.NewReader(string(f.data))), Version: "3.5.0"}, nil
}

// withTrailer is db followed by its SHA-256, as etcd sends a snapshot.
func withTrailer(db []byte) []byte {
	sum := sha256.Sum256(db)
	return append(append([]byte(nil), db...), sum[:]...)
}

func TestSnapshotSavesAVerifiedPrivateFile(t *testing.T) {
	dir := t.TempDir()
	db := []byte(strings.Repeat("bolt page ", 10000))
	at := time.Date(2026, 11, 28, 14, 30, 5, 0, time.FixedZone("CET", 3600))
	path, size, err := Snapshot(context.Background(), fakeSnapshotter{withTrailer(db)}, dir, "v1.35.4", at)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "upgrade", "etcd-v1.35.4-20261128T133005Z.db"); path != want {
		t.Errorf("path %s, want %s", path, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || size != int64(len(db)+sha256.Size) || st.Size() != size {
		t.Errorf("mode %v size %d (reported %d), want 0600 and %d", st.Mode().Perm(), st.Size(), size, len(db)+sha256.Size)
	}
}

func TestSnapshotRefusesACorruptStream(t *testing.T) {
	for name, data := range map[string][]byte{
		"flipped byte": func() []byte { d := withTrailer([]byte("some data of etcd")); d[3] ^= 1; return d }(),
		"cut short":    withTrailer([]byte("some data of etcd"))[:20],
		"empty":        nil,
	} {
		dir := t.TempDir()
		_, _, err := Snapshot(context.Background(), fakeSnapshotter{data}, dir, "v1.35.4", time.Now())
		if !errors.Is(err, etcdmembers.ErrSnapshotHash) {
			t.Errorf("%s: want the hash error, got %v", name, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "upgrade")); len(ents) != 0 {
			t.Errorf("%s: left %d files in upgrade/", name, len(ents))
		}
	}
}

func TestSnapshotFollowsNoLinkInDir(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(dir, "upgrade")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Snapshot(context.Background(), fakeSnapshotter{withTrailer([]byte("x"))}, dir, "v1.35.4", time.Now()); err == nil {
		t.Fatal("wrote through a link in --dir")
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("%d files written where the link points", len(ents))
	}
}
