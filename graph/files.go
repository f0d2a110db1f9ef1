package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
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

// dirFetcher is the FileFetcher over --dir. It records every file it
// returned (path -> content hash) so the store can tell whether the user
// edited an asset's files.
type dirFetcher struct {
	dir  string
	mu   sync.Mutex
	seen map[string]string
}

func newDirFetcher(dir string) *dirFetcher {
	return &dirFetcher{dir: dir, seen: map[string]string{}}
}

// FetchByName implements FileFetcher.
func (d *dirFetcher) FetchByName(name string) (*File, error) {
	name = path.Clean(name)
	if !fs.ValidPath(name) {
		return nil, fmt.Errorf("%s: not a path inside --dir", name)
	}
	full := filepath.Join(d.dir, filepath.FromSlash(name))
	st, err := os.Stat(full)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file: %w", name, fs.ErrNotExist)
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.seen[name] = hashBytes(data)
	d.mu.Unlock()
	return &File{Path: name, Data: data, Mode: st.Mode().Perm()}, nil
}

// FetchByPattern implements FileFetcher.
func (d *dirFetcher) FetchByPattern(pattern string) ([]*File, error) {
	matches, err := filepath.Glob(filepath.Join(d.dir, filepath.FromSlash(pattern)))
	if err != nil {
		return nil, err
	}
	sort.Strings(matches)
	var files []*File
	for _, m := range matches {
		rel, err := filepath.Rel(d.dir, m)
		if err != nil {
			return nil, err
		}
		f, err := d.FetchByName(filepath.ToSlash(rel))
		if errors.Is(err, fs.ErrNotExist) {
			continue // a directory
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
