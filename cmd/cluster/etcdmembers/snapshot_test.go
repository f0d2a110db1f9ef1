package etcdmembers

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kiln-project/kiln/assets/tls/tlstest"
)

// TestSaveSnapshotOfEmbeddedEtcd saves a snapshot of a real etcd that
// holds a key: the stream passes its integrity check, read back too, and
// holds the key; one byte changed fails the check.
func TestSaveSnapshotOfEmbeddedEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &testCluster{t: t, ca: tlstest.CA(t)}
	peer := freeURL(t)
	m0, err := c.start("m0", peer, "m0="+peer, "new")
	if err != nil {
		t.Fatal(err)
	}
	m0.ready(t)
	cli := m0.dial(t)
	if _, err := cli.Put(ctx, "/registry/configmaps/ns/kept", "value"); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	n, err := SaveSnapshot(ctx, cli, &b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) || !bytes.Contains(b.Bytes(), []byte("/registry/configmaps/ns/kept")) {
		t.Errorf("snapshot of %d bytes (reported %d) lacks the key", b.Len(), n)
	}
	check := NewSnapshotCheck()
	check.Write(b.Bytes())
	if err := check.Verify(); err != nil {
		t.Errorf("the saved snapshot read back: %v", err)
	}
	data := b.Bytes()
	data[len(data)/2] ^= 1
	check = NewSnapshotCheck()
	check.Write(data)
	if err := check.Verify(); !errors.Is(err, ErrSnapshotHash) {
		t.Errorf("a changed snapshot: %v, want ErrSnapshotHash", err)
	}
}
