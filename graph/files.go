package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// defaultMode is the mode of a File whose Mode is zero.
const defaultMode fs.FileMode = 0o644

// ModeOf returns f's mode, defaulting to 0644.
func ModeOf(f *File) fs.FileMode {
	if f.Mode == 0 {
		return defaultMode
	}
	return f.Mode.Perm()
}

// hashBytes is the content hash used in the state file.
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// dirFetcher is the FileFetcher over --dir for one asset, whose files are
// of kind input. It records every file it returned (path -> content hash)
// so the store can tell whether the user edited an asset's files.
type dirFetcher struct {
	dir    string
	input  Input
	budget *budget // shared by the fetchers of one store
	mu     sync.Mutex
	seen   map[string]string
}

func newDirFetcher(dir string, input Input, b *budget) *dirFetcher {
	return &dirFetcher{dir: dir, input: input, budget: b, seen: map[string]string{}}
}

// FetchByName implements FileFetcher. A path that is there but is no
// regular file (a directory, a FIFO) is an input error saying what it is,
// not "not found"; so is a file larger than its kind of input allows (a
// *SizeError), which is not read. Every file fetched is one kiln writes,
// consumes or removes, so a symbolic link at it or on the way to it is
// refused: an *InputError holding the *atomicfile.SymlinkError that names
// the link.
func (d *dirFetcher) FetchByName(name string) (*File, error) {
	name = path.Clean(name)
	if !fs.ValidPath(name) {
		return nil, fmt.Errorf("%s: not a path inside --dir", name)
	}
	data, mode, err := readInput(d.dir, name, d.input, d.budget)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.seen[name] = hashBytes(data)
	d.mu.Unlock()
	return &File{Path: name, Data: data, Mode: mode}, nil
}

// ReadFile reads the file name (slash-separated, relative to dir) of kind
// input, as an asset's Load does: a path that is no regular file, or a
// file larger than input.MaxSize, is an input error, and the file is not
// read; a missing file is an error satisfying errors.Is(err,
// fs.ErrNotExist). It is for commands that read --dir outside the store.
func ReadFile(dir, name string, input Input) ([]byte, error) {
	data, _, err := readInput(dir, name, input, nil)
	return data, err
}

// readInput reads dir/name, of kind input, within its size limits. The
// file is opened following no symbolic link below dir, without blocking (a FIFO put there meanwhile does not hang
// kiln), checked by its size before it is read (a 100 GiB sparse file costs
// nothing), and read through a LimitReader (a file growing meanwhile cannot
// slip past the limit). b counts the files of kinds with a total limit.
func readInput(dir, name string, input Input, b *budget) ([]byte, fs.FileMode, error) {
	full := filepath.Join(dir, filepath.FromSlash(name))
	f, err := atomicfile.OpenFile(dir, full, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, atomicfile.ErrSymlink) {
		return nil, 0, &InputError{Err: err}
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, &InputError{Err: fmt.Errorf("%s is %s, not a regular file", name, describeMode(st.Mode()))}
	}
	limit := input.MaxSize()
	if st.Size() > limit {
		return nil, 0, &InputError{Err: &SizeError{Path: name, Input: input, Size: st.Size(), Limit: limit}}
	}
	if err := b.take(name, input, st.Size()); err != nil {
		return nil, 0, &InputError{Err: err}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) > limit {
		return nil, 0, &InputError{Err: &SizeError{Path: name, Input: input, Size: int64(len(data)), Limit: limit, Unsized: true}}
	}
	if err := b.take(name, input, int64(len(data))); err != nil {
		return nil, 0, &InputError{Err: err}
	}
	return data, st.Mode().Perm(), nil
}

// describeMode names a file type for messages.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// FetchByPattern implements FileFetcher.
func (d *dirFetcher) FetchByPattern(pattern string) ([]*File, error) {
	names, err := d.Names(pattern)
	if err != nil {
		return nil, err
	}
	var files []*File
	for _, n := range names {
		f, err := d.FetchByName(n)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// Names implements FileFetcher: directories are left out, symbolic links
// are not (FetchByName refuses them). A name that is not valid UTF-8 is an
// input error (a *NameError): neither Ignition's JSON nor a Kubernetes
// object can carry it.
func (d *dirFetcher) Names(pattern string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(d.dir, filepath.FromSlash(pattern)))
	if err != nil {
		return nil, err
	}
	sort.Strings(matches)
	var names []string
	for _, m := range matches {
		if st, err := os.Lstat(m); err == nil && st.IsDir() {
			continue
		}
		rel, err := filepath.Rel(d.dir, m)
		if err != nil {
			return nil, err
		}
		if !utf8.ValidString(rel) {
			return nil, &InputError{Err: &NameError{Path: filepath.ToSlash(rel)}}
		}
		names = append(names, filepath.ToSlash(rel))
	}
	return names, nil
}

// NameError is a file in --dir whose name is not valid UTF-8.
type NameError struct {
	// Path is the name as found, relative to --dir; it may hold any byte.
	Path string
}

// Error names the file with its invalid bytes escaped, so that the message
// itself is printable.
func (e *NameError) Error() string {
	return strconv.Quote(e.Path) + ": the file name is not valid UTF-8: rename it " +
		"(Ignition configs and Kubernetes objects carry UTF-8 names only)"
}
