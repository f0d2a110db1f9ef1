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
	return filepath.Join(dir, installdir.Backups, archiveName(infraID, at, encrypted))
}

// archiveName is the file name kiln gives an archive of infraID taken at
// at: <infra ID>-<UTC time>.tar.gz, and EncryptedSuffix when encrypted.
func archiveName(infraID string, at time.Time, encrypted bool) string {
	name := fmt.Sprintf("%s-%s.tar.gz", infraID, at.UTC().Format("20060102T150405Z"))
	if encrypted {
		name += EncryptedSuffix
	}
	return name
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

	m := Manifest{Version: FormatVersion, Cluster: c.Config.Metadata.Name, InfraID: c.InfraID, Platform: c.Config.PlatformName(),
		Kubernetes: version.GitVersion}
	name, w := o.To, &atomicfile.Writer{}
	if name == "" {
		w = &atomicfile.Writer{Root: c.Dir}
	}
	a := archiver{source: fmt.Sprint(endpoints), work: c.Dir, dir: c.Dir, files: true, recipients: o.Recipients, now: now}
	name, m, err = a.take(ctx, etcd, m, w, func(taken time.Time) string {
		if name != "" {
			return name
		}
		return DefaultName(c.Dir, c.InfraID, taken, len(o.Recipients) > 0)
	})
	if err != nil {
		return "", Manifest{}, err
	}
	fmt.Fprintf(out, "etcd snapshot: %.1f MiB from %d member(s), its integrity checked\n", float64(m.Snapshot.Size)/(1<<20), len(endpoints))
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

// archiver takes a snapshot and writes an archive of it.
type archiver struct {
	// source names the etcd members the snapshot comes from.
	source string
	// work is where the snapshot waits, under atomicfile's prefix for a
	// sweep after a crash, until the archive takes it.
	work string
	// dir is --dir, whose files of DirFiles are archived when files is
	// set.
	dir   string
	files bool
	// recipients encrypt the archive when set.
	recipients []age.Recipient
	now        func() time.Time
}

// take streams a snapshot from etcd, checked, and writes the archive of
// m (TakenAt, Snapshot and Files set here) through w, 0600, at the name
// nameAt gives for the snapshot's time. It returns the name and the
// manifest.
func (a archiver) take(ctx context.Context, etcd etcdmembers.Snapshotter, m Manifest, w *atomicfile.Writer, nameAt func(time.Time) string) (string, Manifest, error) {
	tmp, err := os.CreateTemp(a.work, atomicfile.TempPrefix+"backup-*.db")
	if err != nil {
		return "", m, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	m.TakenAt = a.now().UTC()
	if _, err := etcdmembers.SaveSnapshot(ctx, etcd, tmp); err != nil {
		return "", m, fmt.Errorf("etcd snapshot from %s: %w", a.source, err)
	}
	if err := tmp.Sync(); err != nil {
		return "", m, err
	}
	if m.Snapshot, err = Describe(SnapshotName, tmp.Name()); err != nil {
		return "", m, err
	}
	if a.files {
		files, err := DirFiles(a.dir)
		if err != nil {
			return "", m, err
		}
		for _, f := range files {
			d, err := Describe(DirPrefix+f, filepath.Join(a.dir, filepath.FromSlash(f)))
			if err != nil {
				return "", m, err
			}
			m.Files = append(m.Files, d)
		}
	}
	name := nameAt(m.TakenAt)
	err = w.WriteFunc(name, 0o600, func(dst io.Writer) error {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		ew, end, err := encrypting(dst, a.recipients)
		if err != nil {
			return err
		}
		if err := Write(ew, m, tmp, a.dir); err != nil {
			return err
		}
		return end()
	})
	if err != nil {
		return "", m, fmt.Errorf("backup %s: %w", name, err)
	}
	return name, m, nil
}
