package restore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/platforms"
)

// cluster is a local cluster; platform, when not nil, replaces its
// platform.
func cluster(t *testing.T, platform ...types.Platform) *install.Cluster {
	t.Helper()
	p := types.Platform{Local: &local.Platform{}}
	if len(platform) > 0 {
		p = platform[0]
	}
	return &install.Cluster{Cluster: platforms.Cluster{Dir: t.TempDir(), InfraID: "c1-abcde", Config: &types.Config{Platform: p}}}
}

func TestJournalResumesTheSameSnapshotOnly(t *testing.T) {
	c := cluster(t)
	m := backup.Manifest{Snapshot: backup.Member{SHA256: "aaaa"}}
	at := time.Date(2026, 12, 4, 19, 6, 52, 0, time.UTC)
	j, err := journal(c, m, []string{"c1-abcde-master-0", "c1-abcde-master-1"}, at)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Journal{Run: "20261204T190652Z", Snapshot: "aaaa", Seed: "c1-abcde-master-0"}); j != want {
		t.Fatalf("journal %+v, want %+v", j, want)
	}
	// Run again later with the same archive: the same restore.
	again, err := journal(c, m, []string{"c1-abcde-master-0", "c1-abcde-master-1"}, at.Add(time.Hour))
	if err != nil || again != j {
		t.Errorf("the second run's journal %+v, %v; want %+v", again, err, j)
	}
	// Another archive while it is under way: refused, naming the run.
	other := backup.Manifest{Snapshot: backup.Member{SHA256: "bbbb"}}
	_, err = journal(c, other, []string{"c1-abcde-master-0"}, at.Add(time.Hour))
	if exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "20261204T190652Z") {
		t.Errorf("another archive under way: %v, want an input error naming the restore", err)
	}
}

func TestClusterRefusesAPlatformWithoutNodeShell(t *testing.T) {
	err := Cluster(context.Background(), cluster(t), nil, Options{From: "/nonexistent"}, logrus.New(), platforms.NoProgress{}, io.Discard)
	if exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "platform local cannot reach its machines") {
		t.Errorf("Cluster without a NodeShell = %v, want an input error naming the platform", err)
	}
}

// shell is a platforms.NodeShell that must not be used.
type shell struct {
	platforms.Provisioner
	t *testing.T
}

func (s shell) PutNodeFile(context.Context, *platforms.Cluster, string, string, io.Reader, fs.FileMode) error {
	s.t.Error("a file was put on a node")
	return errors.New("no")
}

func (s shell) RunOnNode(context.Context, *platforms.Cluster, string, ...string) ([]byte, error) {
	s.t.Error("a command ran on a node")
	return nil, errors.New("no")
}

func TestClusterRefusesAMissingArchiveBeforeTouchingANode(t *testing.T) {
	err := Cluster(context.Background(), cluster(t), shell{t: t}, Options{From: "/nonexistent/backup.tar.gz"}, logrus.New(), platforms.NoProgress{}, io.Discard)
	if exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "--from") {
		t.Errorf("Cluster with a missing archive = %v, want an input error naming --from", err)
	}
}

func TestNodeArgv(t *testing.T) {
	if got, want := NodeArgv("r1", "", "", ""), []string{"/usr/local/bin/kiln", "node", "etcd-restore", "--run=r1"}; !slices.Equal(got, want) {
		t.Errorf("other master: %q, want %q", got, want)
	}
	got := NodeArgv("r1", "/var/lib/kiln/etcd-restore.db", "c-master-0", "https://10.0.0.11:2380")
	want := []string{"/usr/local/bin/kiln", "node", "etcd-restore", "--run=r1", "--snapshot=/var/lib/kiln/etcd-restore.db",
		"--node-name=c-master-0", "--peer-url=https://10.0.0.11:2380"}
	if !slices.Equal(got, want) {
		t.Errorf("restoring master: %q, want %q", got, want)
	}
}
