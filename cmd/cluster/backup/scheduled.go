package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/graph/atomicfile"
)

// Scheduled is one backup the cluster takes by itself on a master
// (install-config backup:, `kiln node etcd-backup` in a CronJob's pod):
// the snapshot of the master's etcd member, archived into Dir with no file
// of --dir (the cluster has none; a restore reads them from --dir), then
// all but the newest Keep archives of the cluster in Dir removed.
type Scheduled struct {
	// Dir is the master's backup directory.
	Dir string
	// Manifest names the cluster: Cluster, InfraID, Platform and
	// Kubernetes are kept; the rest is set here.
	Manifest Manifest
	// Keep is how many archives of the cluster Dir keeps.
	Keep int
	// Recipients encrypt the archives when set.
	Recipients []age.Recipient
	// Source names the etcd member, for errors.
	Source string
	Now    func() time.Time
}

// Run takes the backup, prunes Dir and prints what it did to out. It
// returns the archive's path.
func (s Scheduled) Run(ctx context.Context, etcd etcdmembers.Snapshotter, out io.Writer) (string, error) {
	if s.Keep < 1 {
		return "", fmt.Errorf("keep %d: at least one archive is kept", s.Keep)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", err
	}
	start := s.Now()
	m := s.Manifest
	m.Version, m.Files = FormatVersion, nil
	w := &atomicfile.Writer{Root: s.Dir}
	a := archiver{source: s.Source, work: s.Dir, recipients: s.Recipients, now: s.Now}
	name, m, err := a.take(ctx, etcd, m, w, func(taken time.Time) string {
		return filepath.Join(s.Dir, archiveName(m.InfraID, taken, len(s.Recipients) > 0))
	})
	if err != nil {
		return "", err
	}
	st, err := os.Stat(name)
	if err != nil {
		return "", err
	}
	removed, err := prune(s.Dir, m.InfraID, s.Keep, s.Now())
	fmt.Fprintf(out, "backup of %s (%s): %s, %.1f MiB, 0600, etcd snapshot of %s integrity-checked; %d older archive(s) removed, %d kept; %s\n",
		m.Cluster, m.InfraID, name, float64(st.Size())/(1<<20), s.Source, len(removed), s.Keep, s.Now().Sub(start).Round(100*time.Millisecond))
	if err != nil {
		return name, fmt.Errorf("removing older archives: %w", err)
	}
	return name, nil
}

// staleTemp is the age after which a temporary file in the backup
// directory is a killed run's: no run lasts that long (the Job's deadline
// is 15 minutes).
const staleTemp = time.Hour

// prune removes all but the newest keep archives of infraID in dir (by the
// UTC time in their names), and the temporary files of runs killed more
// than staleTemp before now; it returns the archives it removed. Other
// files are left alone, and so is anything that is not a regular file.
func prune(dir, infraID string, keep int, now time.Time) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	w := atomicfile.Writer{Root: dir}
	var ours []string
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, atomicfile.TempPrefix) {
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > staleTemp {
				if err := w.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
			continue
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(n, infraID+"-") ||
			!(strings.HasSuffix(n, ".tar.gz") || strings.HasSuffix(n, ".tar.gz"+EncryptedSuffix)) {
			continue
		}
		ours = append(ours, n)
	}
	// The names hold the time as 20060102T150405Z: they sort by it.
	slices.Sort(ours)
	if len(ours) <= keep {
		return nil, errors.Join(errs...)
	}
	old := ours[:len(ours)-keep]
	for _, n := range old {
		if err := w.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return old, errors.Join(errs...)
}
