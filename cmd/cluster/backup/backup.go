package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
)

// Options are what Cluster takes besides the cluster.
type Options struct {
	// To is the archive's path; "" names it in --dir's Backups folder
	// after the infra ID and the UTC time (DefaultName).
	To string
	// Recipients, when set, are the age public keys the archive is
	// encrypted to; only their identities read it again.
	Recipients []age.Recipient
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultName is the archive's path in dir when no --to names one; an
// encrypted archive's ends in EncryptedSuffix.
func DefaultName(dir, infraID string, at time.Time, encrypted bool) string {
	name := fmt.Sprintf("%s-%s.tar.gz", infraID, at.UTC().Format("20060102T150405Z"))
	if encrypted {
		name += EncryptedSuffix
	}
	return filepath.Join(dir, installdir.Backups, name)
}

// Cluster backs up c: etcd's snapshot, taken from the members on its
// masters as the API server's etcd client (through the cluster's dialer)
// and checked, and --dir's files of DirFiles, archived by Write into
// o.To or DefaultName: 0600, atomically, following no link in --dir. It
// prints what it took to out and returns the archive's path and
// manifest.
func Cluster(ctx context.Context, c *install.Cluster, prov platforms.Provisioner, o Options, out io.Writer) (string, Manifest, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	start := now()
	dial, err := c.Dialer(prov)
	if err != nil {
		return "", Manifest{}, err
	}
	rc, err := c.RestConfig(dial)
	if err != nil {
		return "", Manifest{}, err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", Manifest{}, err
	}
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		return "", Manifest{}, fmt.Errorf("the API server's version: %w", err)
	}
	found, err := scale.FindClusterEtcd(ctx, c.Dir, kube)
	if err != nil {
		return "", Manifest{}, err
	}
	endpoints := found.Endpoints
	etcd, err := found.Dial(dial.DialContext)
	if err != nil {
		return "", Manifest{}, err
	}
	defer etcd.Close()

	// The snapshot waits in --dir, under atomicfile's prefix for a sweep
	// after a crash, until the archive takes it.
	tmp, err := os.CreateTemp(c.Dir, atomicfile.TempPrefix+"backup-*.db")
	if err != nil {
		return "", Manifest{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	taken := now().UTC()
	if _, err := etcdmembers.SaveSnapshot(ctx, etcd, tmp); err != nil {
		return "", Manifest{}, fmt.Errorf("etcd snapshot from %v: %w", endpoints, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", Manifest{}, err
	}
	m := Manifest{Version: FormatVersion, Cluster: c.Config.Metadata.Name, InfraID: c.InfraID, Platform: c.Config.PlatformName(),
		Kubernetes: version.GitVersion, TakenAt: taken}
	if m.Snapshot, err = Describe(SnapshotName, tmp.Name()); err != nil {
		return "", Manifest{}, err
	}
	fmt.Fprintf(out, "etcd snapshot: %.1f MiB from %d member(s), its integrity checked\n", float64(m.Snapshot.Size)/(1<<20), len(endpoints))
	files, err := DirFiles(c.Dir)
	if err != nil {
		return "", Manifest{}, err
	}
	for _, f := range files {
		d, err := Describe(DirPrefix+f, filepath.Join(c.Dir, filepath.FromSlash(f)))
		if err != nil {
			return "", Manifest{}, err
		}
		m.Files = append(m.Files, d)
	}

	name, w := o.To, &atomicfile.Writer{}
	if name == "" {
		name, w = DefaultName(c.Dir, c.InfraID, taken, len(o.Recipients) > 0), &atomicfile.Writer{Root: c.Dir}
	}
	err = w.WriteFunc(name, 0o600, func(dst io.Writer) error {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		ew, end, err := encrypting(dst, o.Recipients)
		if err != nil {
			return err
		}
		if err := Write(ew, m, tmp, c.Dir); err != nil {
			return err
		}
		return end()
	})
	if err != nil {
		return "", Manifest{}, fmt.Errorf("backup %s: %w", name, err)
	}
	st, err := os.Stat(name)
	if err != nil {
		return "", Manifest{}, err
	}
	sealed := ""
	if len(o.Recipients) > 0 {
		sealed = fmt.Sprintf(", encrypted to %d key(s)", len(o.Recipients))
	}
	fmt.Fprintf(out, "backup of %s (%s): %s, %.1f MiB, 0600%s, with %d files of --dir; %s\n",
		m.Cluster, m.InfraID, name, float64(st.Size())/(1<<20), sealed, len(m.Files), now().Sub(start).Round(100*time.Millisecond))
	return name, m, nil
}
