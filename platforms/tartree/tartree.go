// Package tartree writes a directory tree as a tar stream: the node
// image's export and the ssh platform's pushes to hosts.
package tartree

import (
	"archive/tar"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write writes the tree at root into tw, without closing it: numeric
// owners, modes, hard links, symlinks and device nodes preserved, paths
// relative to root. It stops at the first error or when ctx is done.
func Write(ctx context.Context, tw *tar.Writer, root string) error {
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return err
		}
		h.Name, h.Uname, h.Gname, h.Format = filepath.ToSlash(rel), "", "", tar.FormatPAX
		h.AccessTime, h.ChangeTime = fi.ModTime(), fi.ModTime()
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino}
			if first, ok := links[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(h)
			}
			links[key] = h.Name
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
}
