package atomicfile

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
)

// maxParallelSyncs bounds the fsync calls a Batch has in flight at once.
const maxParallelSyncs = 16

// Batch writes and removes several files with the guarantees of Write and
// Remove for each file, and shares the cost of making them durable: every
// file is written to its temporary file first; Commit then syncs all the
// temporary files at once (the file system commits them together), renames
// each over its target, and syncs every directory it touched once, instead
// of two syncs per file. When Commit returns nil every write and removal of
// the batch is durable. A batch that fails or is interrupted leaves each
// target with its old or its new content, never a part, but it may have
// replaced some targets and not others: a caller that needs all or nothing
// records the batch first (graph's journal does).
//
// A Batch is used by one goroutine. The Writer's Fault sees every operation
// of the batch in the order the batch performs each phase: all the syncs of
// the files, then the renames, then the directory syncs.
type Batch struct {
	w *Writer
	// files are the pending writes, in the order Write queued them.
	files []*temp
	// dirs are the directories to sync at Commit.
	dirs map[string]bool
	// removed are the names Remove removed, never synced as directories.
	removed map[string]bool
}

// Batch returns an empty batch writing through w.
func (w *Writer) Batch() *Batch {
	return &Batch{w: w, dirs: map[string]bool{}, removed: map[string]bool{}}
}

// Write writes data with mode into a temporary file beside name, creating
// missing parent directories 0755; Commit puts it in place. On error the
// temporary file is removed and the batch can still be committed or
// aborted.
func (b *Batch) Write(name string, data []byte, mode fs.FileMode) error {
	tmp, created, err := b.w.openTemp(name, mode)
	for _, d := range created {
		// A new directory's entry is in its parent: sync that too.
		b.dirs[filepath.Dir(d)] = true
	}
	if err != nil {
		return err
	}
	if _, err := tmp.f.Write(data); err != nil {
		tmp.abort()
		tmp.dir.Close()
		return err
	}
	b.files = append(b.files, tmp)
	return nil
}

// Remove removes the file or empty directory name now; Commit syncs its
// directory. A name that does not exist is not an error. A symbolic link at
// name is removed, never what it points to.
func (b *Batch) Remove(name string) error {
	if err := b.w.fault(OpRemove, name); err != nil {
		return err
	}
	d, _, err := b.w.openDir(filepath.Dir(name), false, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unlinkAt(d, name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	b.removed[name] = true
	b.dirs[filepath.Dir(name)] = true
	return nil
}

// Commit syncs every pending file, renames each over its target and syncs
// every directory the batch changed. On error the pending files not yet
// renamed are removed. The batch is empty afterwards.
func (b *Batch) Commit() error {
	defer b.Abort()
	for _, f := range b.files {
		if err := b.w.fault(OpSync, f.name); err != nil {
			return err
		}
	}
	if err := parallel(b.files, func(f *temp) error { return f.f.Sync() }); err != nil {
		return err
	}
	for len(b.files) > 0 {
		f := b.files[0]
		if err := f.f.Close(); err != nil {
			return err
		}
		if err := b.w.fault(OpRename, f.name); err != nil {
			return err
		}
		if err := renameAt(f); err != nil {
			return err
		}
		f.dir.Close()
		b.files = b.files[1:]
		b.dirs[filepath.Dir(f.name)] = true
	}
	var dirs []string
	for d := range b.dirs {
		if !b.removed[d] {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		if err := b.w.fault(OpSyncDir, d); err != nil {
			return err
		}
	}
	return parallel(dirs, b.w.syncDirNamed)
}

// Abort removes the pending files of a batch that is not committed; the
// batch is empty afterwards. Aborting a committed batch does nothing.
func (b *Batch) Abort() {
	for _, f := range b.files {
		f.abort()
		f.dir.Close()
	}
	b.files = nil
	clear(b.dirs)
	clear(b.removed)
}

// parallel runs fn on every item, at most maxParallelSyncs at once, and
// returns the errors joined.
func parallel[T any](items []T, fn func(T) error) error {
	if len(items) == 1 {
		return fn(items[0])
	}
	errs := make([]error, len(items))
	sem := make(chan struct{}, maxParallelSyncs)
	var wg sync.WaitGroup
	for i, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(it)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
