// Package atomicfile is kiln's one way to write a file: readers, and a
// process that starts after a crash or power loss, see the old content or the
// new content of a file, never a part, and no temporary file is left behind
// by a write that failed.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempPrefix starts the name of every temporary file a write creates (in the
// target's directory), so a sweep after a crash can find them: see
// RemoveTemps.
const TempPrefix = ".kiln-tmp-"

// Write writes data to name with mode: into a temporary file in the same
// directory, synced to disk, then renamed over name, and the directory
// synced so the rename itself survives a power loss. Missing parent
// directories are created 0755. On any error the temporary file is removed
// and name is left as it was.
func Write(name string, data []byte, mode fs.FileMode) error {
	return WriteFunc(name, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write for content produced by a function that streams it
// into w, for files too large to hold in memory.
func WriteFunc(name string, mode fs.FileMode, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, TempPrefix+filepath.Base(name)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes 0600 files; Chmod sets exactly mode, whatever the umask.
	if err := tmp.Chmod(mode.Perm()); err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir flushes a directory's entries (a rename, a create, a remove in it)
// to disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// RemoveTemps removes the temporary files that writes into dir (not its
// sub-directories) left behind when their process was killed, and returns
// their names.
func RemoveTemps(dir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, TempPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return matches, nil
}
