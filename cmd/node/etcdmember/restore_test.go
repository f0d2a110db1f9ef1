package etcdmember

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// restoreNode is a master's files for Restore: its Kubernetes directory
// with the control plane's static pods, etcd's data, and a snapshot.
type restoreNode struct {
	root   string
	execs  [][]string
	stops  int
	failOn string // a failing command's first argument
}

func newRestoreNode(t *testing.T) *restoreNode {
	t.Helper()
	n := &restoreNode{root: t.TempDir()}
	for name, data := range map[string]string{
		"kubernetes/manifests/etcd.yaml":            "etcd",
		"kubernetes/manifests/kube-apiserver.yaml":  "apiserver",
		"kubernetes/manifests/kube-scheduler.yaml":  "scheduler",
		"kubernetes/" + nodelayout.StagedPodsSubdir: "",
		"etcd/member/snap/db":                       "old data",
		"kiln/etcd-restore.db":                      "snapshot",
		"bin/etcdutl":                               "#!",
	} {
		p := filepath.Join(n.root, filepath.FromSlash(name))
		if data == "" {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// restore is the Restore of run on n; seed makes it the master that
// restores the snapshot. Its etcdutl writes a "restored" file into the
// data directory it is given.
func (n *restoreNode) restore(run string, seed bool) *Restore {
	r := &Restore{
		Run: run, KubeDir: n.path("kubernetes"), DataDir: n.path("etcd"), Marker: n.path("kiln/etcd-restore"),
		Etcdutl: n.path("bin/etcdutl"),
		Now:     func() time.Time { return time.Unix(1_800_000_000, 0) },
		Log:     logrus.New(),
		Exec: func(_ context.Context, argv ...string) ([]byte, error) {
			n.execs = append(n.execs, argv)
			if argv[0] == n.failOn {
				return []byte("etcdutl: snapshot file has wrong sha256"), errors.New("exit status 1")
			}
			for _, a := range argv {
				if dir, ok := strings.CutPrefix(a, "--data-dir="); ok {
					if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
						return nil, err
					}
					return nil, os.WriteFile(filepath.Join(dir, "member", "restored"), nil, 0o600)
				}
			}
			return nil, nil
		},
		Stopped: func(context.Context) bool { n.stops++; return true },
	}
	if seed {
		r.Snapshot, r.Name, r.PeerURL = n.path("kiln/etcd-restore.db"), "c-master-0", "https://10.0.0.11:2380"
	}
	return r
}

func (n *restoreNode) path(rel string) string { return filepath.Join(n.root, filepath.FromSlash(rel)) }

func (n *restoreNode) exists(t *testing.T, rel string) bool {
	t.Helper()
	_, err := os.Lstat(n.path(rel))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func (n *restoreNode) want(t *testing.T, present, absent []string) {
	t.Helper()
	for _, p := range present {
		if !n.exists(t, p) {
			t.Errorf("%s is missing", p)
		}
	}
	for _, p := range absent {
		if n.exists(t, p) {
			t.Errorf("%s is there, want it gone", p)
		}
	}
}

func TestRestoreSeed(t *testing.T) {
	n := newRestoreNode(t)
	if err := n.restore("20261204T190652Z", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.want(t, []string{
		"kubernetes/manifests/etcd.yaml", "kubernetes/manifests/kube-apiserver.yaml", "kubernetes/manifests/kube-scheduler.yaml",
		"etcd/member/restored", "etcd/member.before-restore-20261204T190652Z/snap/db",
	}, []string{
		"kiln/etcd-restore.db", "etcd/member/snap/db", "etcd/restoring-20261204T190652Z",
		"kubernetes/" + nodelayout.StagedPodsSubdir + "/kube-apiserver.yaml", "kubernetes/etcd.before-restore-20261204T190652Z.yaml",
	})
	if marker, _ := os.ReadFile(n.path("kiln/etcd-restore")); string(marker) != "20261204T190652Z\n" {
		t.Errorf("marker %q", marker)
	}
	if len(n.execs) != 1 {
		t.Fatalf("commands %q, want etcdutl's restore alone", n.execs)
	}
	want := []string{n.path("bin/etcdutl"), "snapshot", "restore", n.path("kiln/etcd-restore.db"),
		"--name=c-master-0", "--initial-cluster=c-master-0=https://10.0.0.11:2380",
		"--initial-advertise-peer-urls=https://10.0.0.11:2380", "--data-dir=" + n.path("etcd/restoring-20261204T190652Z"),
		"--bump-revision=18000000000000", "--mark-compacted"}
	if !slices.Equal(n.execs[0], want) {
		t.Errorf("etcdutl\n got %q\nwant %q", n.execs[0], want)
	}
	if n.stops == 0 {
		t.Error("the restore did not wait for etcd and the API server to stop")
	}
}

func TestRestoreOtherMaster(t *testing.T) {
	n := newRestoreNode(t)
	if err := n.restore("r1", false).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The API server staged until the member votes again; etcd's manifest
	// and data kept aside; no etcdutl.
	n.want(t, []string{
		"kubernetes/" + nodelayout.StagedPodsSubdir + "/kube-apiserver.yaml", "kubernetes/manifests/kube-scheduler.yaml",
		"etcd/member.before-restore-r1/snap/db", "kubernetes/etcd.before-restore-r1.yaml",
	}, []string{"kubernetes/manifests/etcd.yaml", "kubernetes/manifests/kube-apiserver.yaml", "etcd/member"})
	if len(n.execs) != 0 {
		t.Errorf("commands %q, want none", n.execs)
	}
}

func TestRestoreRunsOnce(t *testing.T) {
	n := newRestoreNode(t)
	if err := n.restore("r1", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Etcd writes on; the same restore again changes nothing, and a
	// snapshot copied again is removed.
	if err := os.WriteFile(n.path("etcd/member/after"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.path("kiln/etcd-restore.db"), []byte("snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.execs, n.stops = nil, 0
	if err := n.restore("r1", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(n.execs) != 0 || n.stops != 0 {
		t.Errorf("a second run of r1 ran %q and waited %d times; want nothing", n.execs, n.stops)
	}
	n.want(t, []string{"etcd/member/after", "kubernetes/manifests/etcd.yaml"}, []string{"kiln/etcd-restore.db"})
}

func TestRestoreResumesAfterTheRestoredData(t *testing.T) {
	n := newRestoreNode(t)
	if err := n.restore("r1", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Killed after the restore, before its marker: the run again keeps
	// the restored data and the data of before the restore as they are.
	if err := os.Remove(n.path("kiln/etcd-restore")); err != nil {
		t.Fatal(err)
	}
	n.execs = nil
	if err := n.restore("r1", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(n.execs) != 0 {
		t.Errorf("etcdutl ran again: %q", n.execs)
	}
	n.want(t, []string{"etcd/member/restored", "etcd/member.before-restore-r1/snap/db",
		"kubernetes/manifests/etcd.yaml", "kubernetes/manifests/kube-apiserver.yaml"}, []string{"etcd/restoring-r1"})
}

func TestRestoreFailedEtcdutlKeepsTheOldData(t *testing.T) {
	n := newRestoreNode(t)
	n.failOn = n.path("bin/etcdutl")
	err := n.restore("r1", true).Do(context.Background())
	if err == nil || !strings.Contains(err.Error(), "wrong sha256") {
		t.Fatalf("Do = %v, want etcdutl's error with its output", err)
	}
	// Nothing marked done; the old data aside; a fixed etcdutl finishes.
	n.want(t, []string{"etcd/member.before-restore-r1/snap/db", "kiln/etcd-restore.db"}, []string{"kiln/etcd-restore", "etcd/member"})
	n.failOn = ""
	if err := n.restore("r1", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.want(t, []string{"etcd/member/restored", "kubernetes/manifests/etcd.yaml"}, []string{"kiln/etcd-restore.db"})
}

func TestRestoreRefusesABadRunName(t *testing.T) {
	n := newRestoreNode(t)
	for _, run := range []string{"", "../x", "a/b", strings.Repeat("a", 65)} {
		if err := n.restore(run, false).Do(context.Background()); err == nil {
			t.Errorf("run %q accepted", run)
		}
	}
	n.want(t, []string{"etcd/member/snap/db", "kubernetes/manifests/etcd.yaml"}, nil)
}

func TestRestoreSeedWithoutDataDir(t *testing.T) {
	// The seed lost its whole data directory, not only etcd's member.
	n := newRestoreNode(t)
	if err := os.RemoveAll(n.path("etcd")); err != nil {
		t.Fatal(err)
	}
	if err := n.restore("r1", true).Do(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.want(t, []string{"etcd/member/restored", "kubernetes/manifests/etcd.yaml"}, []string{"etcd/member.before-restore-r1", "etcd/restoring-r1"})
	if st, err := os.Stat(n.path("etcd")); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o700 {
		t.Errorf("etcd's data directory is %v, want it made 0700", st.Mode().Perm())
	}
}

func TestRestoreWithoutEtcdutlStopsNothing(t *testing.T) {
	n := newRestoreNode(t)
	if err := os.Remove(n.path("bin/etcdutl")); err != nil {
		t.Fatal(err)
	}
	err := n.restore("r1", true).Do(context.Background())
	if err == nil || !strings.Contains(err.Error(), "etcdutl") {
		t.Fatalf("Do = %v, want an error naming etcdutl", err)
	}
	n.want(t, []string{"kubernetes/manifests/etcd.yaml", "kubernetes/manifests/kube-apiserver.yaml", "etcd/member/snap/db"},
		[]string{"etcd/member.before-restore-r1"})
	if n.stops != 0 {
		t.Error("it waited for etcd to stop")
	}
}
