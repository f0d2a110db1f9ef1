package etcdmember

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// RestoreBumpPerSecond is how far a restore moves etcd's revision past
// the snapshot's (etcdutl's --bump-revision, with --mark-compacted): this
// many times the Unix time in seconds. Every watch and informer then sees
// its revision compacted and lists again, instead of waiting for
// revisions that were lost (the Kubernetes documentation's advice for a
// restore), and so does one after a second restore of the same snapshot:
// its revision passes the first restore's unless the cluster wrote more
// than this many times a second in between.
const RestoreBumpPerSecond = 10_000

// apiServerManifest is the API server's static pod among a master's.
const apiServerManifest = "kube-apiserver.yaml"

// Restore is one master's part of `kiln restore cluster`; every step
// checks what is done first, so that a run cut short is run again whole.
type Restore struct {
	// Run names the restore; the master's marker holds it once its part
	// is done, and its old data keeps it in its name.
	Run string
	// KubeDir is the node's /etc/kubernetes, DataDir etcd's data
	// (/var/lib/etcd), Marker the file that records the part done.
	KubeDir, DataDir, Marker string
	// Snapshot, on the master that restores, is the snapshot file; Name
	// and PeerURL its member's. Empty on the other masters, whose member
	// is added again afterwards.
	Snapshot, Name, PeerURL string
	// Etcdutl is the etcdutl binary of the node's release.
	Etcdutl string
	// Exec runs a command and returns its combined output.
	Exec func(ctx context.Context, argv ...string) ([]byte, error)
	// Stopped reports whether the local etcd and API server are gone.
	Stopped func(ctx context.Context) bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	Log logrus.FieldLogger
}

func (r *Restore) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// runName is what a restore's name may be: it becomes part of paths.
var runName = regexp.MustCompile(`^[0-9A-Za-z-]{1,64}$`)

// Everything a restore keeps aside or writes stays inside etcd's data
// directory (or, for the static pod, /etc/kubernetes): on the same
// filesystem as what it replaces, so each step is one rename even when
// DataDir is a mount point of its own, and gone with the directory when
// a host is given back (the ssh platform's reset).

// memberDir is etcd's data proper: the one directory etcd reads in
// DataDir (the others it names in a warning and leaves alone).
func (r *Restore) memberDir() string { return filepath.Join(r.DataDir, "member") }

// Aside is where the master's etcd data of before the restore is kept.
func (r *Restore) Aside() string { return nodelayout.EtcdRestoreAside(r.DataDir, r.Run) }

// heldManifest is where the member's etcd static pod waits while etcd is
// stopped: in /etc/kubernetes, outside the kubelet's directory.
func (r *Restore) heldManifest() string {
	return filepath.Join(r.KubeDir, "etcd.before-restore-"+r.Run+".yaml")
}

// restoring is the data directory etcdutl writes the restored data into;
// its member directory then takes memberDir's place in one rename.
func (r *Restore) restoring() string { return filepath.Join(r.DataDir, "restoring-"+r.Run) }

// Do carries out the master's part: it stops the local etcd and API server
// (their static pods out of the kubelet's directory: the API server's into
// the staged ones, which the installer activates once the member votes),
// moves etcd's data aside, and on the restoring master restores the
// snapshot as a new one-member cluster and starts etcd and the API server
// on it. The other masters stay without etcd until kiln adds their
// members again.
func (r *Restore) Do(ctx context.Context) error {
	if !runName.MatchString(r.Run) {
		return fmt.Errorf("restore name %q: want 1-64 letters, digits and dashes", r.Run)
	}
	// A run of kiln killed while this master worked leaves this command
	// running; the next run's waits for it to end.
	if err := os.MkdirAll(filepath.Dir(r.Marker), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(r.Marker+".lock", os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if done, err := os.ReadFile(r.Marker); err == nil && strings.TrimSpace(string(done)) == r.Run {
		r.Log.Infof("this master's part of restore %s is done already", r.Run)
		return r.dropSnapshot()
	}
	if r.Snapshot != "" {
		// Before anything stops: a node without it cannot restore.
		if _, err := os.Stat(r.Etcdutl); err != nil {
			return fmt.Errorf("etcdutl, which restores the snapshot, is not on this master: %w (a payload of a kiln older than its restore on ssh: scale the master out and in again, or restore by hand)", err)
		}
	}
	if err := r.stop(ctx); err != nil {
		return err
	}
	// With the old data aside already, memberDir is what an earlier run
	// of this restore wrote: the restored data, or nothing.
	if _, err := os.Lstat(r.Aside()); errors.Is(err, os.ErrNotExist) {
		if err := moveIfPresent(r.memberDir(), r.Aside()); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if _, err := os.Lstat(r.Aside()); err == nil {
		r.Log.Infof("etcd's data of before the restore is kept in %s", r.Aside())
	}
	if r.Snapshot != "" {
		if err := r.restore(ctx); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(r.Marker, []byte(r.Run+"\n"), 0o644); err != nil {
		return err
	}
	return r.dropSnapshot()
}

// dropSnapshot removes the snapshot once restored: it holds every Secret
// of the cluster.
func (r *Restore) dropSnapshot() error {
	if r.Snapshot == "" {
		return nil
	}
	if err := os.Remove(r.Snapshot); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// stop takes etcd's and the API server's static pods out of the kubelet's
// directory and waits until both have stopped.
func (r *Restore) stop(ctx context.Context) error {
	pods := filepath.Join(r.KubeDir, nodelayout.StaticPodsSubdir)
	if err := os.MkdirAll(filepath.Join(r.KubeDir, nodelayout.StagedPodsSubdir), 0o755); err != nil {
		return err
	}
	if err := moveIfPresent(filepath.Join(pods, apiServerManifest), filepath.Join(r.KubeDir, nodelayout.StagedPodsSubdir, apiServerManifest)); err != nil {
		return err
	}
	if err := moveIfPresent(filepath.Join(pods, etcdmembers.ManifestFile), r.heldManifest()); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(pods); err != nil {
		return err
	}
	r.Log.Info("etcd and the API server are stopping (their static pods are out of the kubelet's directory)")
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		return r.Stopped(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("etcd or the API server of this master still answers 3 minutes after its static pod was removed: %w", err)
	}
	return nil
}

// restore writes the snapshot as a new one-member cluster into DataDir
// with etcdutl, then starts etcd and the API server on it.
func (r *Restore) restore(ctx context.Context) error {
	if _, err := os.Stat(r.memberDir()); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(r.DataDir, 0o700); err != nil {
			return err
		}
		if err := os.RemoveAll(r.restoring()); err != nil {
			return err
		}
		bump := uint64(r.now().Unix()) * RestoreBumpPerSecond
		out, err := r.Exec(ctx, RestoreArgv(r.Etcdutl, r.Snapshot, r.Name, r.PeerURL, r.restoring(), bump)...)
		if err != nil {
			return fmt.Errorf("etcdutl snapshot restore: %w: %s", err, strings.TrimSpace(string(out)))
		}
		if err := os.Rename(filepath.Join(r.restoring(), "member"), r.memberDir()); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(r.DataDir); err != nil {
			return err
		}
		r.Log.Infof("snapshot restored into %s as a one-member cluster (%s at %s)", r.DataDir, r.Name, r.PeerURL)
	} else if err != nil {
		return err
	}
	// Empty once its member moved; an earlier run may have left it.
	if err := os.RemoveAll(r.restoring()); err != nil {
		return err
	}
	pods := filepath.Join(r.KubeDir, nodelayout.StaticPodsSubdir)
	if err := moveIfPresent(r.heldManifest(), filepath.Join(pods, etcdmembers.ManifestFile)); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(pods); err != nil {
		return err
	}
	return ActivateStaged(r.KubeDir, r.Log)
}

// RestoreArgv is etcdutl's restore of snapshot into dataDir as a new
// cluster whose one member is name at peerURL, its revision bumped by
// bump and marked compacted.
func RestoreArgv(etcdutl, snapshot, name, peerURL, dataDir string, bump uint64) []string {
	return []string{etcdutl, "snapshot", "restore", snapshot,
		"--name=" + name,
		"--initial-cluster=" + name + "=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--data-dir=" + dataDir,
		fmt.Sprintf("--bump-revision=%d", bump),
		"--mark-compacted",
	}
}

// moveIfPresent renames from to to when from exists; a from already gone
// is a move done by an earlier run.
func moveIfPresent(from, to string) error {
	if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("cannot move %s to %s: it exists (an earlier restore of the same name?)", from, to)
	}
	return os.Rename(from, to)
}

// LocalStopped reports whether nothing listens on the local etcd's client
// and metrics ports or the API server's port.
func LocalStopped(ctx context.Context) bool {
	for _, port := range []string{"2379", "2381", "6443"} {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
		if err == nil {
			c.Close()
			return false
		}
	}
	return true
}
