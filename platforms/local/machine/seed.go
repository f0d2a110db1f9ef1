package machine

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// sharedPrefixes are the parts of a seeded bind directory (relative to it)
// whose files are never written in place once they exist: containerd's
// content blobs (named by their digest, read-only) and the trees of its
// overlayfs snapshots, which containers only ever see as overlay lower
// layers. Files there stay hard links to the node image's, so every
// machine shares their disk blocks and their page cache. Everything else
// (containerd's and its snapshotter's bolt databases, above all) gets a
// private copy.
var sharedPrefixes = []string{
	"io.containerd.content.v1.content/blobs/",
	"io.containerd.snapshotter.v1.overlayfs/snapshots/",
}

// seedBindDir creates a machine's plain host directory for a bind; a new
// one gets what the image has at that place: hard links where the files are
// immutable (sharedPrefixes) and the image is on the same file system,
// private copies otherwise. The tree is built under a temporary name and
// renamed into place once complete, so that a crash can never leave a
// directory whose databases are still links to the image's.
func (m *Manager) seedBindDir(ctx context.Context, dir, from string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	ents, err := os.ReadDir(from)
	if err != nil || len(ents) == 0 {
		return os.Mkdir(dir, 0o755)
	}
	tmp := dir + ".seeding"
	if err := freshDir(tmp); err != nil {
		return err
	}
	if lerr := runQuiet(ctx, m.run, linkTreeArgv(from, tmp)); lerr == nil {
		if err := unshareMutable(tmp); err != nil {
			return fmt.Errorf("seeding %s: %w", dir, err)
		}
	} else {
		// Another file system: start again with a copy.
		m.log.Debugf("cannot hard-link %s into %s (%v); copying it", from, dir, lerr)
		if err := freshDir(tmp); err != nil {
			return err
		}
		if err := runQuiet(ctx, m.run, copyTreeArgv(from, tmp)); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dir)
}

// freshDir makes dir an empty directory (0755), removing what was there.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o755)
}

// copyTreeArgv copies the contents of the directory from into to.
func copyTreeArgv(from, to string) []string {
	return []string{"cp", "-a", "--reflink=auto", from + "/.", to + "/"}
}

// linkTreeArgv recreates the directories of from in to, with their
// attributes, and hard-links every other entry.
func linkTreeArgv(from, to string) []string {
	return []string{"cp", "-a", "--link", from + "/.", to + "/"}
}

// shared reports whether rel (slash-separated, relative to a seeded
// directory) may stay a hard link.
func shared(rel string) bool {
	for _, p := range sharedPrefixes {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

// unshareMutable replaces every hard-linked regular file below dir that is
// not shared by a private copy with the same mode, owner and times.
func unshareMutable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if shared(filepath.ToSlash(rel)) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || st.Nlink < 2 {
			return nil
		}
		return copyOver(p, info, st)
	})
}

// copyOver replaces the file p by a copy of itself, atomically, with its
// permissions and owner.
func copyOver(p string, info fs.FileInfo, st *syscall.Stat_t) error {
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	err = atomicfile.WriteFunc(p, info.Mode().Perm(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
	if err == nil {
		err = os.Chown(p, int(st.Uid), int(st.Gid))
	}
	if err != nil {
		return fmt.Errorf("unsharing %s: %w", p, err)
	}
	return nil
}
