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
// private copies otherwise.
func (m *Manager) seedBindDir(ctx context.Context, dir, from string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(from)
	if err != nil || len(ents) == 0 {
		return nil
	}
	lerr := runQuiet(ctx, m.run, linkTreeArgv(from, dir))
	if lerr == nil {
		if err := unshareMutable(dir); err != nil {
			return fmt.Errorf("seeding %s: %w", dir, err)
		}
		return nil
	}
	m.log.Debugf("cannot hard-link %s into %s (%v); copying it", from, dir, lerr)
	// Another file system: start again with a copy.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return runQuiet(ctx, m.run, copyTreeArgv(from, dir))
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
