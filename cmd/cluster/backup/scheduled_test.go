package backup

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// fakeEtcd streams data, as etcd's Snapshot RPC does.
type fakeEtcd struct{ data []byte }

func (f fakeEtcd) SnapshotWithVersion(context.Context) (*clientv3.SnapshotResponse, error) {
	return &clientv3.SnapshotResponse{Snapshot: io.NopCloser(bytes.NewReader(f.data)), Version: "3.6.0"}, nil
}

// TestScheduledKeepsTheNewest: each run archives a checked snapshot,
// encrypted to the recipients, named by its time; the newest Keep of the
// cluster stay, a killed run's temporary file goes, and other files
// (another cluster's, the operator's, a run's under way) are left alone;
// a corrupt snapshot writes nothing and removes nothing.
func TestScheduledKeepsTheNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	idPath, rs := identity(t, t.TempDir(), "backup.key")
	ids, err := ReadIdentities(idPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	for _, other := range []string{"c2-zzzzz-20200101T000000Z.tar.gz", "notes.txt", atomicfile.TempPrefix + "backup-killed.db", atomicfile.TempPrefix + "backup-running.db"} {
		if err := os.WriteFile(filepath.Join(dir, other), []byte("not ours"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A killed run's temporary file, and one of a run under way.
	if err := os.Chtimes(filepath.Join(dir, atomicfile.TempPrefix+"backup-killed.db"), at, at); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, atomicfile.TempPrefix+"backup-running.db"), at.Add(9*time.Hour), at.Add(9*time.Hour)); err != nil {
		t.Fatal(err)
	}
	s := Scheduled{Dir: dir, Keep: 2, Recipients: rs, Source: "https://127.0.0.1:2379",
		Manifest: Manifest{Cluster: "c", InfraID: "c-abcde", Platform: "local", Kubernetes: "v1.36.3"},
		Now:      func() time.Time { return at }}
	db := withTrailer([]byte(strings.Repeat("bolt page ", 3000)))
	var names []string
	for i := range 3 {
		at = at.Add(time.Duration(i+1) * time.Hour)
		var out bytes.Buffer
		name, err := s.Run(context.Background(), fakeEtcd{db}, &out)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(name))
		if st, err := os.Stat(name); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", name, st.Mode(), err)
		}
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Check(f, ids)
		f.Close()
		if err != nil || m.InfraID != "c-abcde" || m.Kubernetes != "v1.36.3" || len(m.Files) != 0 || !m.TakenAt.Equal(at) {
			t.Errorf("run %d: the archive's manifest %+v, %v", i, m, err)
		}
		if i == 2 && !strings.Contains(out.String(), "1 older archive(s) removed, 2 kept") {
			t.Errorf("the third run said %q", out.String())
		}
	}
	if names[0] != "c-abcde-20261205T040000Z.tar.gz.age" {
		t.Errorf("the first archive is %s", names[0])
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{atomicfile.TempPrefix + "backup-running.db", "c-abcde-20261205T060000Z.tar.gz.age", "c-abcde-20261205T090000Z.tar.gz.age", "c2-zzzzz-20200101T000000Z.tar.gz", "notes.txt"}
	if !slices.Equal(got, want) || names[1] != want[1] || names[2] != want[2] {
		t.Errorf("the directory holds %q, want %q (runs named %q)", got, want, names)
	}

	corrupt := bytes.Clone(db)
	corrupt[10] ^= 1
	at = at.Add(time.Hour)
	if _, err := s.Run(context.Background(), fakeEtcd{corrupt}, io.Discard); err == nil || !strings.Contains(err.Error(), "127.0.0.1:2379") {
		t.Errorf("a corrupt snapshot: %v, want an error naming the member", err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(entries) {
		t.Errorf("a failed run left %d entries, want the %d there before", len(after), len(entries))
	}
}
