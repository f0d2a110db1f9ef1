package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// withTrailer is db followed by its SHA-256, as etcd sends a snapshot.
func withTrailer(db []byte) []byte {
	sum := sha256.Sum256(db)
	return append(append([]byte(nil), db...), sum[:]...)
}

// testDir writes a --dir with what a backup takes and what it leaves,
// and a snapshot file beside it; it returns both.
func testDir(t *testing.T) (dir, snapshot string) {
	t.Helper()
	dir = t.TempDir()
	files := map[string]string{
		installdir.State:           `{"assets":{}}`,
		installdir.Metadata:        `{"infraID":"c-abcde"}`,
		installdir.AdminKubeconfig: "kubeconfig",
		installdir.Shape:           `{"masters":3}`,
		installdir.Terraform + "/network/terraform.tfstate":      `{"version":4}`,
		installdir.Terraform + "/network/.terraform/providers/p": "a provider binary",
		installdir.Ignition("bootstrap"):                         "bootstrap ignition",
		installdir.DebugLog:                                      "log",
		installdir.UpgradeSnapshots + "/etcd-v1.db":              "an older snapshot",
		installdir.Backups + "/old.tar.gz":                       "an older backup",
		".kiln/" + atomicfile.TempPrefix + "state":               "a write under way",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snapshot = filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(snapshot, withTrailer([]byte(strings.Repeat("bolt page ", 5000))), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, snapshot
}

// manifestOf describes snapshot and dir's backed-up files.
func manifestOf(t *testing.T, dir, snapshot string) Manifest {
	t.Helper()
	m := Manifest{Version: FormatVersion, Cluster: "c", InfraID: "c-abcde", Platform: "local", Kubernetes: "v1.36.0",
		TakenAt: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)}
	var err error
	if m.Snapshot, err = Describe(SnapshotName, snapshot); err != nil {
		t.Fatal(err)
	}
	files, err := DirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		d, err := Describe(DirPrefix+f, filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, d)
	}
	return m
}

// archive writes m's archive and returns it.
func archive(t *testing.T, m Manifest, dir, snapshot string) []byte {
	t.Helper()
	snap, err := os.Open(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var b bytes.Buffer
	if err := Write(&b, m, snap, dir); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDirFilesTakesWhatARestoreNeeds(t *testing.T) {
	dir, _ := testDir(t)
	got, err := DirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{installdir.Shape, installdir.Terraform + "/network/terraform.tfstate", installdir.State, installdir.AdminKubeconfig, installdir.Metadata}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("DirFiles:\n%q\nwant:\n%q", got, want)
	}
}

func TestDirFilesRefusesALink(t *testing.T) {
	dir, _ := testDir(t)
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, installdir.Auth, "kubeconfig-other")); err != nil {
		t.Fatal(err)
	}
	if _, err := DirFiles(dir); err == nil || !strings.Contains(err.Error(), "kubeconfig-other is a symbolic link") {
		t.Errorf("DirFiles with a link in auth/: %v", err)
	}
}

func TestWriteThenCheck(t *testing.T) {
	dir, snapshot := testDir(t)
	m := manifestOf(t, dir, snapshot)
	data := archive(t, m, dir, snapshot)
	got, err := Check(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.InfraID != m.InfraID || got.Snapshot != m.Snapshot || len(got.Files) != 5 || !got.TakenAt.Equal(m.TakenAt) {
		t.Errorf("Check's manifest %+v, want %+v", got, m)
	}
	// The members are the manifest, the snapshot, and the files, each
	// with its mode and content.
	var names []string
	tr := tar.NewReader(mustGunzip(t, data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		body, _ := io.ReadAll(tr)
		if hdr.Name == DirPrefix+installdir.Shape && (string(body) != `{"masters":3}` || hdr.Mode != 0o600) {
			t.Errorf("%s: %q mode %o", hdr.Name, body, hdr.Mode)
		}
	}
	if len(names) != 7 || names[0] != ManifestName || names[1] != SnapshotName {
		t.Errorf("members %q", names)
	}
	// Read copies the members asked for, and only those.
	var snap, state, none bytes.Buffer
	sinks := Sinks{Snapshot: &snap, Dir: map[string]io.Writer{installdir.State: &state, installdir.Ignition("bootstrap"): &none}}
	if _, err := Read(bytes.NewReader(data), nil, sinks); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(snapshot)
	if !bytes.Equal(snap.Bytes(), want) || state.String() != `{"assets":{}}` || none.Len() != 0 {
		t.Errorf("Read copied snapshot %d bytes (want %d), state %q, an unarchived file %q", snap.Len(), len(want), state.String(), none.String())
	}
}

func mustGunzip(t *testing.T, data []byte) io.Reader {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return gz
}

func TestWriteRefusesAFileChangedSinceTheManifest(t *testing.T) {
	dir, snapshot := testDir(t)
	m := manifestOf(t, dir, snapshot)
	if err := os.WriteFile(filepath.Join(dir, installdir.State), []byte(`{"assets":{"x":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, _ := os.Open(snapshot)
	defer snap.Close()
	err := Write(io.Discard, m, snap, dir)
	if err == nil || !strings.Contains(err.Error(), "changed while the backup was written") {
		t.Errorf("Write of a changed state file: %v", err)
	}
}

// rewrite returns the archive data with its members changed by edit
// (name → content; a nil content drops the member) and extra members
// added, the manifest kept.
func rewrite(t *testing.T, data []byte, edit map[string][]byte, extra map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	tr := tar.NewReader(mustGunzip(t, data))
	put := func(name string, body []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if e, ok := edit[hdr.Name]; ok {
			if e == nil {
				continue
			}
			body = e
		}
		put(hdr.Name, body)
	}
	for name, body := range extra {
		put(name, body)
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func TestCheckFindsEveryDifference(t *testing.T) {
	dir, snapshot := testDir(t)
	m := manifestOf(t, dir, snapshot)
	data := archive(t, m, dir, snapshot)
	badSnapshot := withTrailer([]byte(strings.Repeat("bolt page ", 5000)))
	badSnapshot[10] ^= 1
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"a file changed":    {rewrite(t, data, map[string][]byte{DirPrefix + installdir.State: []byte(`{"assets":{"y":2}}`)}, nil), "does not match its manifest"},
		"a file missing":    {rewrite(t, data, map[string][]byte{DirPrefix + installdir.Metadata: nil}, nil), "missing from the archive: dir/metadata.json"},
		"an extra member":   {rewrite(t, data, nil, map[string][]byte{"dir/../../etc/cron.d/x": []byte("* * * * * root sh")}), "not in its manifest"},
		"snapshot corrupt":  {rewrite(t, data, map[string][]byte{SnapshotName: badSnapshot}, nil), etcdmembers.ErrSnapshotHash.Error()},
		"not gzip":          {[]byte("plain text"), "not a kiln backup"},
		"no manifest first": {rewrite(t, data, map[string][]byte{ManifestName: nil}, nil), "first member is not backup.json"},
	} {
		if _, err := Check(bytes.NewReader(tc.data), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check said %v; want %q", name, err, tc.want)
		}
	}
}
