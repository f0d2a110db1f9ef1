package nodeimage

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxLinks bounds the symlinks followed while resolving one path, as the
// kernel's ELOOP limit does.
const maxLinks = 40

// tree collects files of a root directory (the node's Debian tree) as layer
// entries at their real paths, with symlinks for the paths that led there.
type tree struct {
	root    string
	seen    map[string]bool
	entries []LayerEntry
}

// resolve returns the real path of p inside the tree: every symlink is
// followed, absolute targets relative to the tree's root, as chroot would.
func (t *tree) resolve(p string) (string, error) {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur, links := "/", 0
	for i := 0; i < len(parts); i++ {
		if parts[i] == "" {
			continue
		}
		next := path.Join(cur, parts[i])
		fi, err := os.Lstat(filepath.Join(t.root, next))
		if err != nil {
			return "", fmt.Errorf("%s in %s: %w", p, t.root, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s in %s: too many levels of symbolic links", p, t.root)
		}
		target, err := os.Readlink(filepath.Join(t.root, next))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		parts = append(strings.Split(strings.Trim(path.Clean(target), "/"), "/"), parts[i+1:]...)
		cur, i = "/", -1
	}
	return cur, nil
}

// find returns the first path of name in toolDirs that exists in the tree.
func (t *tree) find(name string) (string, error) {
	for _, d := range toolDirs {
		p := path.Join(d, name)
		if _, err := t.resolve(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s (looked in %s)", name, t.root, strings.Join(toolDirs[:], ", "))
}

// add adds the regular file p resolves to, and a symlink from p's own name
// to it when p is a link. It returns the real path.
func (t *tree) add(p string) (string, error) {
	real, err := t.resolve(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(filepath.Join(t.root, real))
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s in %s is not a regular file", p, t.root)
	}
	if !t.seen[real] {
		t.seen[real] = true
		t.entries = append(t.entries, LayerEntry{Name: real[1:], Source: filepath.Join(t.root, real), Mode: int64(fi.Mode().Perm())})
	}
	dir, err := t.resolve(path.Dir(p))
	if err != nil {
		return "", err
	}
	if alias := path.Join(dir, path.Base(p)); alias != real && !t.seen[alias] {
		t.seen[alias] = true
		t.entries = append(t.entries, LayerEntry{Name: alias[1:], Link: real})
	}
	return real, nil
}

// addDir adds every file of directory d and returns their real paths.
func (t *tree) addDir(d string) ([]string, error) {
	real, err := t.resolve(d)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(t.root, real))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		p, err := t.add(path.Join(real, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
