package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSymlink is matched (errors.Is) by every *SymlinkError.
var ErrSymlink = errors.New("symbolic link refused")

// ErrOutsideRoot is the error of a name that is not in or below the root
// directory it was given with.
var ErrOutsideRoot = errors.New("not inside the root directory")

// SymlinkError is a symbolic link found where kiln writes: the file named,
// or a directory on the way to it from the root. kiln never follows a
// symbolic link below the root (--dir), so a link planted there cannot send
// a write, a chmod or a removal elsewhere.
type SymlinkError struct {
	// Path is the link, the root joined with its path below the root.
	Path string
	// Target is what the link points to; empty when it could not be read.
	Target string
}

// Error names the link and what to do about it.
func (e *SymlinkError) Error() string {
	target := ""
	if e.Target != "" {
		target = " to " + e.Target
	}
	return fmt.Sprintf("%s is a symbolic link%s; kiln never follows a symbolic link where it writes: "+
		"replace the link with the file or directory itself, or remove it", e.Path, target)
}

// Is makes errors.Is(err, ErrSymlink) true for a *SymlinkError.
func (e *SymlinkError) Is(target error) bool { return target == ErrSymlink }

// OpenFile opens name, which must be root or below it, like os.OpenFile,
// but follows no symbolic link below root: not in the directories between
// root and name, nor name itself (O_NOFOLLOW is always added). A link there
// is a *SymlinkError naming it. root itself is opened as named.
func OpenFile(root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	return openFile(root, name, flag, perm, false)
}

func openFile(root, name string, flag int, perm fs.FileMode, fallback bool) (*os.File, error) {
	t, rel, err := openTree(root, name, fallback)
	if err != nil {
		return nil, err
	}
	defer t.close()
	fd, err := t.open(rel, flag, uint32(perm.Perm()))
	if err != nil {
		return nil, t.pathError("open", rel, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ReadFile reads name, which must be root or below it, following no
// symbolic link below root (see OpenFile).
func ReadFile(root, name string) ([]byte, error) {
	f, err := OpenFile(root, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Stat returns the file information of name, which must be root or below
// it, following no symbolic link below root: a link on the way or at name
// is a *SymlinkError.
func Stat(root, name string) (fs.FileInfo, error) {
	return stat(root, name, false)
}

func stat(root, name string, fallback bool) (fs.FileInfo, error) {
	t, rel, err := openTree(root, name, fallback)
	if err != nil {
		return nil, err
	}
	defer t.close()
	fd, err := t.open(rel, unix.O_PATH, 0)
	if err != nil {
		return nil, t.pathError("stat", rel, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil, t.linkError(rel, unix.ELOOP)
	}
	return info, nil
}

// CheckNoSymlink returns a *SymlinkError when name (root or below it) or a
// directory between root and name is a symbolic link, and nil otherwise,
// also when name does not exist: a check before work that must not start
// when a write would be refused.
func CheckNoSymlink(root, name string) error {
	_, err := Stat(root, name)
	if errors.Is(err, ErrSymlink) || errors.Is(err, ErrOutsideRoot) {
		return err
	}
	return nil
}

// tree is an open root directory below which names are resolved without
// following symbolic links: with openat2(2) and RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS, or, on a kernel without it, one component at a time
// with openat(2) and O_NOFOLLOW from the root's descriptor.
type tree struct {
	// path is the root as named, cleaned.
	path string
	fd   int
	// fallback resolves component by component even where openat2 exists
	// (tests of the path older kernels take).
	fallback bool
}

// openTree opens root and returns it with name relative to it ("." for
// root itself). A name outside root is an error wrapping ErrOutsideRoot.
func openTree(root, name string, fallback bool) (*tree, string, error) {
	rel, err := relBelow(root, name)
	if err != nil {
		return nil, "", err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &fs.PathError{Op: "open", Path: root, Err: err}
	}
	return &tree{path: filepath.Clean(root), fd: fd, fallback: fallback}, rel, nil
}

// relBelow returns name relative to root, lexically: "." for root itself,
// never a path that climbs out with "..".
func relBelow(root, name string) (string, error) {
	if filepath.IsAbs(root) != filepath.IsAbs(name) {
		var err error
		if root, err = filepath.Abs(root); err != nil {
			return "", err
		}
		if name, err = filepath.Abs(name); err != nil {
			return "", err
		}
	}
	rel, err := filepath.Rel(root, name)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w %s", ErrOutsideRoot, root)}
	}
	return rel, nil
}

func (t *tree) close() { unix.Close(t.fd) }

// full returns the name of rel below the root.
func (t *tree) full(rel string) string { return filepath.Join(t.path, rel) }

// pathError returns err as returned by a tree operation on rel: a
// *SymlinkError or an error wrapping ErrOutsideRoot as it is, anything else
// as a *fs.PathError naming the file.
func (t *tree) pathError(op, rel string, err error) error {
	if errors.Is(err, ErrSymlink) || errors.Is(err, ErrOutsideRoot) {
		return err
	}
	return &fs.PathError{Op: op, Path: t.full(rel), Err: err}
}

// maxOpenat2Retries bounds the retries of an openat2 that the kernel asks
// to retry (EAGAIN: a rename raced the lookup) before kiln resolves the
// name one component at a time instead.
const maxOpenat2Retries = 64

// open opens rel below the root with flags (plus O_NOFOLLOW and
// O_CLOEXEC) and, when creating, perm. A symbolic link at rel or on the way
// is a *SymlinkError.
func (t *tree) open(rel string, flags int, perm uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !t.fallback {
		how := &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
		if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
			how.Mode = uint64(perm)
		}
		for range maxOpenat2Retries {
			fd, err := unix.Openat2(t.fd, rel, how)
			switch {
			case err == nil:
				return fd, nil
			case err == unix.EINTR || err == unix.EAGAIN:
				continue
			case err == unix.ELOOP || err == unix.ENOTDIR:
				// ENOTDIR: O_DIRECTORY and O_NOFOLLOW on a link.
				return -1, t.linkError(rel, err)
			case err == unix.EXDEV:
				return -1, &fs.PathError{Op: "open", Path: t.full(rel), Err: fmt.Errorf("%w %s", ErrOutsideRoot, t.path)}
			case err == unix.ENOSYS || err == unix.EPERM || err == unix.E2BIG:
				// No openat2 (kernels before 5.6, or a seccomp filter
				// refusing it): resolve one component at a time.
			default:
				return -1, err
			}
			break
		}
	}
	return t.walk(rel, flags, perm)
}

// walk is open without openat2: every directory on the way is opened with
// O_NOFOLLOW from its parent's descriptor, starting at the root's.
func (t *tree) walk(rel string, flags int, perm uint32) (int, error) {
	if rel == "." {
		return unix.Openat(t.fd, ".", flags, perm)
	}
	parts := strings.Split(rel, "/")
	dir := t.fd
	for _, p := range parts[:len(parts)-1] {
		fd, err := openDirAt(dir, p)
		if dir != t.fd {
			unix.Close(dir)
		}
		if err != nil {
			return -1, t.walkError(rel, err)
		}
		dir = fd
	}
	fd, err := unix.Openat(dir, parts[len(parts)-1], flags, perm)
	if dir != t.fd {
		unix.Close(dir)
	}
	if err != nil {
		return -1, t.walkError(rel, err)
	}
	return fd, nil
}

// walkError turns the error of an openat with O_NOFOLLOW into a
// *SymlinkError when a link caused it (ELOOP for a file, ENOTDIR for a
// directory).
func (t *tree) walkError(rel string, err error) error {
	if err == unix.ELOOP || err == unix.ENOTDIR {
		return t.linkError(rel, err)
	}
	return err
}

// openDirAt opens the directory name in dir without following a link.
func openDirAt(dir int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// linkError finds the symbolic link on the way from the root to rel that
// made a lookup fail with err, and returns it as a *SymlinkError; err when
// there is none (any more).
func (t *tree) linkError(rel string, err error) error {
	if rel == "." {
		return err
	}
	parts := strings.Split(rel, "/")
	dir := t.fd
	defer func() {
		if dir != t.fd {
			unix.Close(dir)
		}
	}()
	for i, p := range parts {
		var st unix.Stat_t
		if unix.Fstatat(dir, p, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target := ""
			buf := make([]byte, unix.PathMax)
			if n, rerr := unix.Readlinkat(dir, p, buf); rerr == nil {
				target = string(buf[:n])
			}
			return &SymlinkError{Path: t.full(filepath.Join(parts[:i+1]...)), Target: target}
		}
		if i == len(parts)-1 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return err
		}
		fd, oerr := openDirAt(dir, p)
		if oerr != nil {
			return err
		}
		if dir != t.fd {
			unix.Close(dir)
		}
		dir = fd
	}
	return err
}

// mkdirs opens the directory rel below the root, creating it and its
// missing parents with perm, without following a link; it returns the
// directory's descriptor and those it created, outermost first.
func (t *tree) mkdirs(rel string, perm uint32) (int, []string, error) {
	if rel == "." {
		fd, err := openDirAt(t.fd, ".")
		return fd, nil, err
	}
	var created []string
	dir := t.fd
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		fd, err := openDirAt(dir, p)
		if err == unix.ENOENT {
			if err = unix.Mkdirat(dir, p, perm); err == nil {
				created = append(created, t.full(filepath.Join(parts[:i+1]...)))
			}
			if err == nil || err == unix.EEXIST {
				fd, err = openDirAt(dir, p)
			}
		}
		if dir != t.fd {
			unix.Close(dir)
		}
		if err != nil {
			return -1, created, t.walkError(filepath.Join(parts[:i+1]...), err)
		}
		dir = fd
	}
	return dir, created, nil
}

// removeAllAt removes name in the directory dir and, when it is a
// directory, everything in it, following no symbolic link: a link is
// removed, never what it points to. A name that does not exist is not an
// error.
func removeAllAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	fd, err := openDirAt(dir, name)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	// Entries created while the directory is emptied make the removal of
	// the directory fail; a few rounds catch them.
	for range 5 {
		if _, err := d.Seek(0, io.SeekStart); err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := removeAllAt(fd, n); err != nil {
				return err
			}
		}
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.ENOTEMPTY && err != unix.EEXIST {
			return err
		}
	}
	return unix.ENOTEMPTY
}
