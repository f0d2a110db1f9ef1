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

// Op names one file-system operation a Writer performs, for fault injection.
type Op string

// The operations a Writer performs, in the order a write performs them.
const (
	// OpMkdir creates the missing parent directories of a file.
	OpMkdir Op = "mkdir"
	// OpCreate creates the temporary file.
	OpCreate Op = "create"
	// OpWrite writes the content into the temporary file.
	OpWrite Op = "write"
	// OpSync flushes the temporary file to disk.
	OpSync Op = "sync"
	// OpRename renames the temporary file over the target.
	OpRename Op = "rename"
	// OpSyncDir flushes a directory's entries to disk.
	OpSyncDir Op = "syncdir"
	// OpRemove removes a file or an empty directory.
	OpRemove Op = "remove"
)

// Writer writes and removes files atomically and durably. Its zero value is
// ready to use. Fault, when set, is called before every operation with the
// path it applies to: an error it returns fails the operation (an I/O error
// such as ENOSPC or EACCES), and a Fault that never returns (it panics or
// exits) stops the process right there, as a crash would. Tests use it to
// prove that every interruption is recovered from.
type Writer struct {
	Fault func(op Op, path string) error
}

func (w *Writer) fault(op Op, path string) error {
	if w == nil || w.Fault == nil {
		return nil
	}
	if err := w.Fault(op, path); err != nil {
		return &fs.PathError{Op: string(op), Path: path, Err: err}
	}
	return nil
}

// Write writes data to name with mode: into a temporary file in the same
// directory, synced to disk, then renamed over name, and the directory
// synced so the rename itself survives a power loss. Missing parent
// directories are created 0755. On any error the temporary file is removed
// and name is left as it was.
func Write(name string, data []byte, mode fs.FileMode) error {
	return (&Writer{}).Write(name, data, mode)
}

// WriteFunc is Write for content produced by a function that streams it
// into w, for files too large to hold in memory.
func WriteFunc(name string, mode fs.FileMode, write func(w io.Writer) error) error {
	return (&Writer{}).WriteFunc(name, mode, write)
}

// Write is the package's Write through w.
func (w *Writer) Write(name string, data []byte, mode fs.FileMode) error {
	return w.WriteFunc(name, mode, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	})
}

// WriteFunc is the package's WriteFunc through w.
func (w *Writer) WriteFunc(name string, mode fs.FileMode, write func(w io.Writer) error) (err error) {
	tmp, _, err := w.openTemp(name, mode)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	return w.commit(tmp, name)
}

// Produce is Write for content that another program writes, given a file
// name (a compiler's -o flag, say): produce receives the name of an empty
// temporary file in name's directory, which it may overwrite or replace.
// When produce succeeds that file gets mode, is synced and renamed over
// name; on any error it is removed and name is left as it was.
func Produce(name string, mode fs.FileMode, produce func(tmpName string) error) error {
	return (&Writer{}).Produce(name, mode, produce)
}

// Produce is the package's Produce through w.
func (w *Writer) Produce(name string, mode fs.FileMode, produce func(tmpName string) error) (err error) {
	tmp, _, err := w.createTemp(name)
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			os.Remove(tmpName)
		}
	}()
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := w.fault(OpWrite, name); err != nil {
		return err
	}
	if err := produce(tmpName); err != nil {
		return err
	}
	// The program may have replaced the file: commit what the name holds now.
	f, err := os.OpenFile(tmpName, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		f.Close()
		return err
	}
	if err := w.commit(f, name); err != nil {
		f.Close()
		return err
	}
	return nil
}

// createTemp creates the temporary file for a write of name, creating
// missing parent directories 0755; it returns those, outermost first.
func (w *Writer) createTemp(name string) (*os.File, []string, error) {
	created, err := w.mkdirs(filepath.Dir(name))
	if err != nil {
		return nil, created, err
	}
	if err := w.fault(OpCreate, name); err != nil {
		return nil, created, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), TempPrefix+filepath.Base(name)+"-*")
	return tmp, created, err
}

// openTemp is createTemp for content written by this process: the file gets
// mode and is ready for the write (the fault seam has seen OpWrite). On
// error nothing is left but the directories created.
func (w *Writer) openTemp(name string, mode fs.FileMode) (*os.File, []string, error) {
	tmp, created, err := w.createTemp(name)
	if err != nil {
		return nil, created, err
	}
	// CreateTemp makes 0600 files; Chmod sets exactly mode, whatever the umask.
	err = tmp.Chmod(mode.Perm())
	if err == nil {
		err = w.fault(OpWrite, name)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, created, err
	}
	return tmp, created, nil
}

// commit syncs and closes the written temporary file tmp, renames it to
// name and syncs the directory. The caller removes tmp when commit fails.
func (w *Writer) commit(tmp *os.File, name string) error {
	if err := w.fault(OpSync, name); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := w.fault(OpRename, name); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return w.syncDir(filepath.Dir(name))
}

// Remove removes the file or empty directory name and syncs its directory,
// so the removal survives a power loss. A name that does not exist is not an
// error.
func (w *Writer) Remove(name string) error {
	if err := w.fault(OpRemove, name); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return w.syncDir(filepath.Dir(name))
}

func (w *Writer) syncDir(dir string) error {
	if err := w.fault(OpSyncDir, dir); err != nil {
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
	return (&Writer{}).RemoveTemps(dir)
}

// RemoveTemps is the package's RemoveTemps through w.
func (w *Writer) RemoveTemps(dir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, TempPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		if err := w.Remove(m); err != nil {
			return nil, err
		}
	}
	return matches, nil
}
