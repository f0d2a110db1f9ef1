// Package atomicfile is kiln's one way to write a file: readers, and a
// process that starts after a crash or power loss, see the old content or the
// new content of a file, never a part, and no temporary file is left behind
// by a write that failed. Below a Writer's Root (kiln's --dir) it follows no
// symbolic link: a link planted where kiln writes is refused with a
// *SymlinkError instead of redirecting the write (docs/crash-safety.md,
// "Links in --dir").
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
// ready to use.
//
// Root, when set, is the directory every name given to the Writer is in or
// below (kiln's --dir), and the Writer follows no symbolic link below it:
// every directory on the way to a file, and the file itself, is opened with
// openat2(2) and RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (on kernels without
// it, one component at a time with O_NOFOLLOW), and the temporary file, the
// rename, the removal and the directory sync all happen relative to the
// directory so opened. A link there is refused with a *SymlinkError naming
// it, before anything is written. Root itself is followed as named. Without
// Root, the directories the Writer creates are never links, but those that
// existed are followed, and a link at the name written is replaced by the
// file (a rename never follows it), as a machine's root file system needs.
//
// Fault, when set, is called before every operation with the path it
// applies to: an error it returns fails the operation (an I/O error such as
// ENOSPC or EACCES), and a Fault that never returns (it panics or exits)
// stops the process right there, as a crash would. Tests use it to prove
// that every interruption is recovered from.
type Writer struct {
	Root  string
	Fault func(op Op, path string) error
	// fallback resolves names one component at a time even where openat2
	// exists: tests of the path kernels before 5.6 take.
	fallback bool
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
			tmp.abort()
		}
		tmp.dir.Close()
	}()
	if err := write(tmp.f); err != nil {
		return err
	}
	return w.commit(tmp)
}

// Produce is Write for content that another program writes, given a file
// name (a compiler's -o flag, say): produce receives the name of an empty
// temporary file in name's directory, which it may overwrite or replace.
// When produce succeeds that file gets mode, is synced and renamed over
// name; on any error it is removed and name is left as it was. The program
// opens the temporary file by its name: give it only directories nobody
// else may write.
func Produce(name string, mode fs.FileMode, produce func(tmpName string) error) error {
	return (&Writer{}).Produce(name, mode, produce)
}

// Produce is the package's Produce through w.
func (w *Writer) Produce(name string, mode fs.FileMode, produce func(tmpName string) error) (err error) {
	tmp, _, err := w.createTemp(name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.abort()
		}
		tmp.dir.Close()
	}()
	if err := tmp.f.Close(); err != nil {
		return err
	}
	if err := w.fault(OpWrite, name); err != nil {
		return err
	}
	if err := produce(tmp.f.Name()); err != nil {
		return err
	}
	// The program may have replaced the file: commit what the name holds
	// now, provided it is no link.
	fd, err := unix.Openat(int(tmp.dir.Fd()), tmp.base(), unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP {
		return &SymlinkError{Path: tmp.f.Name(), Target: readlinkAt(tmp.dir, tmp.base())}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: tmp.f.Name(), Err: err}
	}
	tmp.f = os.NewFile(uintptr(fd), tmp.f.Name())
	if err := tmp.f.Chmod(mode.Perm()); err != nil {
		return err
	}
	return w.commit(tmp)
}

// temp is a temporary file written in dir, to be renamed to name.
type temp struct {
	// name is the target.
	name string
	// dir is name's directory, opened without following a link below the
	// writer's root: the rename happens in it, whatever its path names by
	// then.
	dir *os.File
	// f is the temporary file, named by its full path.
	f *os.File
}

// base is the temporary file's name in dir.
func (t *temp) base() string { return filepath.Base(t.f.Name()) }

// abort closes and removes the temporary file; dir stays open.
func (t *temp) abort() {
	t.f.Close()
	_ = unix.Unlinkat(int(t.dir.Fd()), t.base(), 0)
}

// createTemp creates the temporary file for a write of name, creating
// missing parent directories 0755; it returns those, outermost first. Below
// a Root, name must not be a symbolic link.
func (w *Writer) createTemp(name string) (*temp, []string, error) {
	d, created, err := w.openDir(filepath.Dir(name), true, 0o755)
	if err != nil {
		return nil, created, err
	}
	if target, ok := isLinkAt(d, filepath.Base(name)); ok && w.Root != "" {
		d.Close()
		return nil, created, &SymlinkError{Path: name, Target: target}
	}
	if err := w.fault(OpCreate, name); err != nil {
		d.Close()
		return nil, created, err
	}
	f, err := createTempAt(d, name)
	if err != nil {
		d.Close()
		return nil, created, err
	}
	return &temp{name: name, dir: d, f: f}, created, nil
}

// createTempAt creates a new temporary file for name, 0600, in its
// directory d.
func createTempAt(d *os.File, name string) (*os.File, error) {
	prefix := TempPrefix + filepath.Base(name) + "-"
	for range 10000 {
		base := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		full := filepath.Join(filepath.Dir(name), base)
		fd, err := unix.Openat(int(d.Fd()), base, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == unix.EEXIST || err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "create", Path: full, Err: err}
		}
		return os.NewFile(uintptr(fd), full), nil
	}
	return nil, &fs.PathError{Op: "create", Path: prefix + "*", Err: fs.ErrExist}
}

// openTemp is createTemp for content written by this process: the file gets
// mode and is ready for the write (the fault seam has seen OpWrite). On
// error nothing is left but the directories created.
func (w *Writer) openTemp(name string, mode fs.FileMode) (*temp, []string, error) {
	tmp, created, err := w.createTemp(name)
	if err != nil {
		return nil, created, err
	}
	// The file was created 0600; Chmod sets exactly mode, whatever the umask.
	err = tmp.f.Chmod(mode.Perm())
	if err == nil {
		err = w.fault(OpWrite, name)
	}
	if err != nil {
		tmp.abort()
		tmp.dir.Close()
		return nil, created, err
	}
	return tmp, created, nil
}

// commit syncs and closes the written temporary file, renames it to its
// target and syncs the directory. The caller removes the temporary file
// when commit fails, and closes the directory.
func (w *Writer) commit(tmp *temp) error {
	if err := w.fault(OpSync, tmp.name); err != nil {
		return err
	}
	if err := tmp.f.Sync(); err != nil {
		return err
	}
	if err := tmp.f.Close(); err != nil {
		return err
	}
	if err := w.fault(OpRename, tmp.name); err != nil {
		return err
	}
	if err := renameAt(tmp); err != nil {
		return err
	}
	return w.syncDir(tmp.dir, filepath.Dir(tmp.name))
}

// renameAt renames tmp's file over its target, in their directory.
func renameAt(tmp *temp) error {
	dfd := int(tmp.dir.Fd())
	if err := unix.Renameat(dfd, tmp.base(), dfd, filepath.Base(tmp.name)); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp.f.Name(), New: tmp.name, Err: err}
	}
	return nil
}

// openDir opens the directory dir without following a symbolic link below
// the root (see Writer). When create is set, missing directories are
// created with perm (after the OpMkdir fault) and returned, outermost
// first.
func (w *Writer) openDir(dir string, create bool, perm fs.FileMode) (*os.File, []string, error) {
	t, rel, err := w.tree(dir)
	if err != nil {
		return nil, nil, err
	}
	defer t.close()
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	var created []string
	if errors.Is(err, unix.ENOENT) && create {
		if ferr := w.fault(OpMkdir, dir); ferr != nil {
			return nil, nil, ferr
		}
		fd, created, err = t.mkdirs(rel, uint32(perm.Perm()))
	}
	if err != nil {
		return nil, created, t.pathError("open", rel, err)
	}
	return os.NewFile(uintptr(fd), dir), created, nil
}

// tree opens the root dir is resolved from: w.Root, or without one dir's
// nearest existing ancestor, followed as named.
func (w *Writer) tree(dir string) (*tree, string, error) {
	root := w.Root
	if root == "" {
		root = dir
		for {
			if _, err := os.Stat(root); err == nil || filepath.Dir(root) == root {
				break
			}
			root = filepath.Dir(root)
		}
	}
	return openTree(root, dir, w.fallback)
}

// MkdirAll creates dir and its missing parents with perm, none of them
// through a symbolic link below the root; an existing dir is left as it
// is.
func (w *Writer) MkdirAll(dir string, perm fs.FileMode) error {
	d, _, err := w.openDir(dir, true, perm)
	if err != nil {
		return err
	}
	return d.Close()
}

// Remove removes the file or empty directory name and syncs its directory,
// so the removal survives a power loss. A name that does not exist is not an
// error. A symbolic link at name is removed, never what it points to.
func (w *Writer) Remove(name string) error {
	return w.removeIn(name, func(d *os.File) error { return unlinkAt(d, name) })
}

// RemoveAll removes name and, if it is a directory, everything below it,
// following no symbolic link (a link is removed, not what it points to),
// and syncs name's directory. A name that does not exist is not an error.
func (w *Writer) RemoveAll(name string) error {
	return w.removeIn(name, func(d *os.File) error {
		if err := removeAllAt(int(d.Fd()), filepath.Base(name)); err != nil {
			return &fs.PathError{Op: "remove", Path: name, Err: err}
		}
		return nil
	})
}

// removeIn runs rm in name's directory, opened without following a
// symbolic link, and then syncs that directory. A missing directory or
// name is not an error.
func (w *Writer) removeIn(name string, rm func(dir *os.File) error) error {
	if err := w.fault(OpRemove, name); err != nil {
		return err
	}
	d, _, err := w.openDir(filepath.Dir(name), false, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := rm(d); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return w.syncDir(d, filepath.Dir(name))
}

// unlinkAt removes the file or empty directory name from its directory d.
func unlinkAt(d *os.File, name string) error {
	base := filepath.Base(name)
	err := unix.Unlinkat(int(d.Fd()), base, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(int(d.Fd()), base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// isLinkAt tells whether name in the directory d is a symbolic link, and
// what it points to.
func isLinkAt(d *os.File, name string) (target string, ok bool) {
	var st unix.Stat_t
	if unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", false
	}
	return readlinkAt(d, name), true
}

// readlinkAt returns what the link name in d points to, or "".
func readlinkAt(d *os.File, name string) string {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(d.Fd()), name, buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// syncDir flushes the entries of the open directory d, named dir.
func (w *Writer) syncDir(d *os.File, dir string) error {
	if err := w.fault(OpSyncDir, dir); err != nil {
		return err
	}
	return syncFile(d)
}

// syncDirNamed opens dir without following a link below the root and
// flushes its entries; the fault seam has seen OpSyncDir.
func (w *Writer) syncDirNamed(dir string) error {
	d, _, err := w.openDir(dir, false, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFile(d)
}

// syncFile flushes d; a file system that cannot sync directories is fine.
func syncFile(d *os.File) error {
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// SyncDir flushes a directory's entries (a rename, a create, a remove in it)
// to disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFile(d)
}

// RemoveTemps removes the temporary files that writes into dir (not its
// sub-directories) left behind when their process was killed, and returns
// their names.
func RemoveTemps(dir string) ([]string, error) {
	return (&Writer{}).RemoveTemps(dir)
}

// RemoveTemps is the package's RemoveTemps through w.
func (w *Writer) RemoveTemps(dir string) ([]string, error) {
	names, err := w.Temps(dir)
	if err != nil {
		return nil, err
	}
	for _, m := range names {
		if err := w.Remove(m); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// Temps returns, sorted, the temporary files of interrupted writes in dir
// (not its sub-directories). A dir that does not exist, or that is or lies
// under a symbolic link below the root, holds none: the Writer never writes
// there.
func (w *Writer) Temps(dir string) ([]string, error) {
	d, _, err := w.openDir(dir, false, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrSymlink) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e, TempPrefix) {
			names = append(names, filepath.Join(dir, e))
		}
	}
	slices.Sort(names)
	return names, nil
}
