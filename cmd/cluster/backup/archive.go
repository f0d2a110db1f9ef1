package backup

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Names of the archive's members.
const (
	// ManifestName is the manifest, the archive's first member.
	ManifestName = "backup.json"
	// SnapshotName is etcd's snapshot, trailer included.
	SnapshotName = "etcd/snapshot.db"
	// DirPrefix begins the names of --dir's files in the archive:
	// dir/<path relative to --dir>.
	DirPrefix = "dir/"
)

// FormatVersion is the version of the archive's layout in its manifest.
const FormatVersion = 1

// Manifest describes a backup archive.
type Manifest struct {
	// Version is FormatVersion when the archive was written.
	Version int `json:"version"`
	// Cluster, InfraID and Platform name the cluster; Kubernetes is the
	// release its API server ran (an upgrade leaves the state's
	// install-config as it was).
	Cluster    string `json:"cluster"`
	InfraID    string `json:"infraID"`
	Platform   string `json:"platform"`
	Kubernetes string `json:"kubernetes"`
	// TakenAt is when the snapshot was taken (UTC).
	TakenAt time.Time `json:"takenAt"`
	// Snapshot is etcd's snapshot: SnapshotName.
	Snapshot Member `json:"snapshot"`
	// Files are the files of --dir, under DirPrefix.
	Files []Member `json:"files"`
}

// Member is one file of the archive.
type Member struct {
	// Name is its name in the archive.
	Name string `json:"name"`
	// Size is its size in bytes and SHA256 the hex SHA-256 of its
	// content.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Mode is its permission bits.
	Mode fs.FileMode `json:"mode"`
}

// DirFiles returns the regular files of dir that installdir.BackedUp
// declares, relative and slash-separated, sorted. Terraform's plugin
// folders (.terraform, providers it installs again) are left out; a
// symbolic link is refused, naming it: kiln writes none there, and
// following one could archive what is not the cluster's.
func DirFiles(dir string) ([]string, error) {
	var out []string
	for _, p := range installdir.BackedUp() {
		root := filepath.Join(dir, filepath.FromSlash(p))
		err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
			switch {
			case errors.Is(err, fs.ErrNotExist) && name == root:
				return nil
			case err != nil:
				return err
			case d.Type()&fs.ModeSymlink != 0:
				return fmt.Errorf("%s is a symbolic link: kiln archives no link", name)
			case d.IsDir() && d.Name() == ".terraform":
				return filepath.SkipDir
			case !d.Type().IsRegular():
				return nil
			case strings.HasPrefix(d.Name(), atomicfile.TempPrefix):
				return nil
			}
			rel, err := filepath.Rel(dir, name)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Write writes the archive of m into w: the manifest, the snapshot read
// from snapshot (m.Snapshot describes it) and each of m.Files read from
// dir. A file whose content no longer matches its member (changed since
// m was made) fails the write.
func Write(w io.Writer, m Manifest, snapshot io.Reader, dir string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	manifest = append(manifest, '\n')
	if err := writeMember(tw, Member{Name: ManifestName, Size: int64(len(manifest)), Mode: 0o600}, strings.NewReader(string(manifest)), m.TakenAt, false); err != nil {
		return err
	}
	if err := writeMember(tw, m.Snapshot, snapshot, m.TakenAt, true); err != nil {
		return err
	}
	for _, f := range m.Files {
		if err := writeFile(tw, f, dir, m.TakenAt); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeFile writes the member f, read from its file in dir.
func writeFile(tw *tar.Writer, f Member, dir string, at time.Time) error {
	in, err := os.Open(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(f.Name, DirPrefix))))
	if err != nil {
		return err
	}
	defer in.Close()
	return writeMember(tw, f, in, at, true)
}

// writeMember writes the member m with the content r, checked against
// m's size and sum when check is set.
func writeMember(tw *tar.Writer, m Member, r io.Reader, at time.Time, check bool) error {
	if err := tw.WriteHeader(&tar.Header{Name: m.Name, Mode: int64(m.Mode.Perm()), Size: m.Size, ModTime: at, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(r, m.Size))
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if check && (n != m.Size || hex.EncodeToString(h.Sum(nil)) != m.SHA256) {
		return fmt.Errorf("%s changed while the backup was written", m.Name)
	}
	return nil
}

// Describe returns the member named name of the file at path: its size,
// mode and SHA-256.
func Describe(name, path string) (Member, error) {
	in, err := os.Open(path)
	if err != nil {
		return Member{}, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return Member{}, err
	}
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err != nil {
		return Member{}, err
	}
	return Member{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Mode: st.Mode().Perm()}, nil
}

// Check reads the archive r whole and returns its manifest once every
// member matches it (each file named, of its size and SHA-256, none
// missing or extra) and the snapshot passes etcd's integrity check; the
// first difference is the error. An encrypted archive is decrypted with
// ids (ErrEncrypted without).
func Check(r io.Reader, ids []age.Identity) (Manifest, error) { return Read(r, ids, Sinks{}) }

// Sinks are where Read copies members as it reads them.
type Sinks struct {
	// Snapshot receives etcd's snapshot; nil discards it.
	Snapshot io.Writer
	// Dir receives, by path relative to --dir (slash-separated, without
	// DirPrefix), the archived files of --dir that the caller wants.
	Dir map[string]io.Writer
}

// Read is Check that also copies members into s as it reads them; what
// was copied is the archive's only when Read returns no error.
func Read(r io.Reader, ids []age.Identity, s Sinks) (Manifest, error) {
	var m Manifest
	r, err := plain(r, ids)
	if err != nil {
		return m, err
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return m, fmt.Errorf("not a kiln backup (gzip): %w", err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != ManifestName {
		return m, fmt.Errorf("not a kiln backup: its first member is not %s", ManifestName)
	}
	if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
		return m, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if m.Version != FormatVersion {
		return m, fmt.Errorf("%s: version %d; this kiln reads version %d", ManifestName, m.Version, FormatVersion)
	}
	want := map[string]Member{m.Snapshot.Name: m.Snapshot}
	for _, f := range m.Files {
		want[f.Name] = f
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, err
		}
		w, ok := want[hdr.Name]
		if !ok || path.Clean(hdr.Name) != hdr.Name {
			return m, fmt.Errorf("%s is in the archive but not in its manifest", hdr.Name)
		}
		delete(want, hdr.Name)
		h, snap := sha256.New(), etcdmembers.NewSnapshotCheck()
		sink := io.Writer(h)
		switch rel, isDir := strings.CutPrefix(hdr.Name, DirPrefix); {
		case hdr.Name == SnapshotName && s.Snapshot != nil:
			sink = io.MultiWriter(h, snap, s.Snapshot)
		case hdr.Name == SnapshotName:
			sink = io.MultiWriter(h, snap)
		case isDir && s.Dir[rel] != nil:
			sink = io.MultiWriter(h, s.Dir[rel])
		}
		n, err := io.Copy(sink, tr)
		if err != nil {
			return m, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if hdr.Name == SnapshotName {
			if err := snap.Verify(); err != nil {
				return m, fmt.Errorf("%s: %w", hdr.Name, err)
			}
		}
		if n != w.Size || hex.EncodeToString(h.Sum(nil)) != w.SHA256 {
			return m, fmt.Errorf("%s does not match its manifest (size %d, want %d; or its SHA-256)", hdr.Name, n, w.Size)
		}
	}
	if len(want) > 0 {
		var missing []string
		for name := range want {
			missing = append(missing, name)
		}
		slices.Sort(missing)
		return m, fmt.Errorf("missing from the archive: %s", strings.Join(missing, ", "))
	}
	return m, nil
}
