package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// journalVersion is the format version of the journal.
const journalVersion = 1

// journal is everything one Persist writes, recorded before the first write:
// replaying it finishes the run, however far it got.
type journal struct {
	Version int `json:"version"`
	// Target is the target being written, for messages.
	Target string `json:"target"`
	// Started is when the run started writing.
	Started time.Time `json:"started"`
	// Writes are the target's files to write.
	Writes []journalFile `json:"writes,omitempty"`
	// Consumes are the files to move into installdir.Consumed, with their content.
	Consumes []journalFile `json:"consumes,omitempty"`
	// State is the new content of the state file.
	State json.RawMessage `json:"state"`
}

// journalFile is one file of a journal.
type journalFile struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"mode"`
	Data []byte      `json:"data"`
	// Was is the content hash of a file to write as it was before the run;
	// empty when there was none. A file holding neither Was nor Data was
	// changed by someone else after the run was interrupted.
	Was string `json:"was,omitempty"`
}

// paths lists every path the journal touches below --dir.
func (j *journal) paths() []string {
	var ps []string
	for _, f := range j.Writes {
		ps = append(ps, f.Path)
	}
	for _, f := range j.Consumes {
		ps = append(ps, f.Path, path.Join(installdir.Consumed, f.Path))
	}
	return ps
}

// readJournal reads dir's journal; it returns nil when there is none.
func readJournal(dir string) (*journal, error) {
	name := filepath.Join(dir, installdir.Journal)
	b, err := ReadFile(dir, installdir.Journal, JournalInput)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	j := &journal{}
	if err := json.Unmarshal(b, j); err != nil || j.Version != journalVersion {
		if err == nil {
			err = fmt.Errorf("format version %d, this kiln reads version %d", j.Version, journalVersion)
		}
		return nil, &InputError{Err: fmt.Errorf("%s: %w: it records an interrupted kiln run that this kiln cannot finish; "+
			"finish it with the kiln that wrote it, or remove %s and %s and start again", name, err, name, installdir.State)}
	}
	for _, p := range j.paths() {
		if !fs.ValidPath(p) || p == "." {
			return nil, &InputError{Err: fmt.Errorf("%s: path %q is not inside --dir", name, p)}
		}
	}
	return j, nil
}

// encode returns the journal as JSON. The state, JSON that newState made,
// is appended as it is: encoding/json would scan and compact all of it
// again (a few hundred KiB).
func (j *journal) encode() ([]byte, error) {
	head := *j
	head.State = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	tail := []byte(`"state":null}`)
	if !bytes.HasSuffix(b, tail) || len(j.State) == 0 {
		return nil, errors.New("journal: no state to record")
	}
	b = append(b[:len(b)-len("null}")], j.State...)
	return append(b, '}'), nil
}

// commit writes the journal, then performs it: that is the only way Persist
// changes --dir.
func (s *Store) commit(j *journal) error {
	b, err := j.encode()
	if err != nil {
		return err
	}
	if err := s.checkLinks(j); err != nil {
		return err
	}
	if err := s.w.Write(filepath.Join(s.dir, installdir.Journal), b, 0o600); err != nil {
		return fmt.Errorf("cannot write to %s: %w", s.dir, err)
	}
	if err := s.replay(j); err != nil {
		if IsInputError(err) {
			return err
		}
		return fmt.Errorf("%w; what kiln was writing is kept in %s: fix the cause and run kiln again to finish writing it",
			err, filepath.Join(s.dir, installdir.Journal))
	}
	return nil
}

// replay performs j. Every step is idempotent and checks what is on disk
// first, so replaying a journal whose run got part-way (or all the way)
// finishes that run and writes nothing twice. The target's files and the
// copies of consumed files are one batch, made durable together before any
// original is removed and before the state file that names them is
// replaced; the removals and the state file are a second batch; the journal
// goes last.
func (s *Store) replay(j *journal) error {
	if err := s.checkLinks(j); err != nil {
		return err
	}
	outputs := s.w.Batch()
	defer outputs.Abort()
	for _, f := range j.Writes {
		if err := s.replayWrite(outputs, j, f); err != nil {
			return err
		}
	}
	var originals []journalFile // consumed files still in place
	for _, f := range j.Consumes {
		exists, err := s.replayCopy(outputs, j, f)
		if err != nil {
			return err
		}
		if exists {
			originals = append(originals, f)
		}
	}
	if err := outputs.Commit(); err != nil {
		return err
	}
	final := s.w.Batch()
	defer final.Abort()
	for _, f := range originals {
		if err := s.removeConsumed(final, f); err != nil {
			return err
		}
	}
	name := filepath.Join(s.dir, installdir.State)
	if old, err := ReadFile(s.dir, installdir.State, StateInput); err != nil || !bytes.Equal(old, j.State) {
		if err := final.Write(name, j.State, 0o600); err != nil {
			return err
		}
	}
	if err := final.Commit(); err != nil {
		return err
	}
	return s.w.Remove(filepath.Join(s.dir, installdir.Journal))
}

// replayWrite queues one of the target's files in b unless it is there
// already.
func (s *Store) replayWrite(b *atomicfile.Batch, j *journal, f journalFile) error {
	full := filepath.Join(s.dir, filepath.FromSlash(f.Path))
	want := hashBytes(f.Data)
	if h, mode, ok := s.fileHash(f.Path); ok {
		if h == want && mode == f.Mode.Perm() {
			return nil
		}
		if h != want && h != f.Was {
			return s.changedSince(j, f.Path)
		}
	}
	s.log.Debugf("Writing %s (%o)", f.Path, f.Mode.Perm())
	return b.Write(full, f.Data, f.Mode)
}

// replayCopy queues in b the copy of one consumed file into installdir.Consumed
// unless it is there already, and tells whether the original is still in
// place, to be removed once the copy is durable.
func (s *Store) replayCopy(b *atomicfile.Batch, j *journal, f journalFile) (exists bool, err error) {
	want := hashBytes(f.Data)
	h, _, exists := s.fileHash(f.Path)
	if exists && h != want {
		return false, s.changedSince(j, f.Path)
	}
	// consumedMode, not f.Mode: a journal an older kiln wrote may carry
	// the original's mode.
	dst := path.Join(installdir.Consumed, f.Path)
	fullDst := filepath.Join(s.dir, filepath.FromSlash(dst))
	if h, mode, ok := s.fileHash(dst); !ok || h != want || mode != consumedMode {
		if err := b.Write(fullDst, f.Data, consumedMode); err != nil {
			return false, err
		}
	}
	return exists, nil
}

// removeConsumed removes a consumed file whose copy is durable, then the
// directories it leaves empty (manifests/).
func (s *Store) removeConsumed(b *atomicfile.Batch, f journalFile) error {
	if err := b.Remove(filepath.Join(s.dir, filepath.FromSlash(f.Path))); err != nil {
		return err
	}
	for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
		full := filepath.Join(s.dir, filepath.FromSlash(d))
		if !s.emptyDir(full) {
			break
		}
		if err := b.Remove(full); err != nil {
			return err
		}
	}
	s.log.Infof("Consumed %s; a copy is in %s", f.Path, path.Join(installdir.Consumed, f.Path))
	return nil
}

// changedSince is the error for a file someone changed after the run that
// was writing it was interrupted: kiln cannot tell which version is wanted.
func (s *Store) changedSince(j *journal, p string) error {
	return &InputError{Err: fmt.Errorf("%s changed after `kiln create %s` (started %s) was interrupted while writing it; "+
		"move your version of %s out of %s and run kiln again: it finishes the interrupted run first",
		p, j.Target, j.Started.Local().Format(time.DateTime), p, s.dir)}
}

// recover finishes an interrupted run (a journal in --dir) and removes the
// temporary files of interrupted writes, holding the lock of --dir.
func (s *Store) recover(st *State) error {
	j, err := readJournal(s.dir)
	if err != nil {
		return err
	}
	dirs := []string{"."}
	for _, e := range st.Assets {
		for p := range e.Disk {
			if fs.ValidPath(p) {
				dirs = append(dirs, path.Dir(p), path.Dir(path.Join(installdir.Consumed, p)))
			}
		}
	}
	if j != nil {
		for _, p := range j.paths() {
			dirs = append(dirs, path.Dir(p))
		}
	}
	dirs = sortedUnique(dirs)
	var temps []string
	for _, d := range dirs {
		m, _ := s.w.Temps(filepath.Join(s.dir, filepath.FromSlash(d)))
		temps = append(temps, m...)
	}
	if j == nil && len(temps) == 0 {
		return nil
	}
	err = s.exclusive(func() error {
		for _, d := range dirs {
			removed, err := s.w.RemoveTemps(filepath.Join(s.dir, filepath.FromSlash(d)))
			if err != nil {
				return err
			}
			if len(removed) > 0 {
				s.log.Infof("Removed %d temporary files of an interrupted kiln run from %s", len(removed), path.Join(s.dir, d))
			}
		}
		if j == nil {
			return nil
		}
		s.log.Warnf("Finishing `kiln create %s`, interrupted at %s, from %s",
			j.Target, j.Started.Local().Format(time.DateTime), filepath.Join(s.dir, installdir.Journal))
		if err := s.checkLinks(j); err != nil {
			return fmt.Errorf("cannot finish the interrupted kiln run recorded in %s: %w", filepath.Join(s.dir, installdir.Journal), err)
		}
		return s.replay(j)
	})
	var busy *BusyError
	if errors.As(err, &busy) && j == nil {
		return nil // the temporary files are the holder's writes in flight
	}
	return err
}

// exclusive runs fn holding the lock of --dir: the caller's, when this
// process holds it already (kiln's commands take it first), else its own.
func (s *Store) exclusive(fn func() error) error {
	if heldHere(s.dir) {
		return fn()
	}
	l, err := LockDir(s.dir, "kiln (asset store)")
	if err != nil {
		return err
	}
	defer l.Unlock()
	return fn()
}

// checkLinks refuses, before anything is written, a journal that would
// write, consume or remove a file through a symbolic link in --dir, or
// replace one: the *atomicfile.SymlinkError names the link. The writes
// themselves refuse links too; checking first leaves --dir as it was.
func (s *Store) checkLinks(j *journal) error {
	for _, p := range append([]string{installdir.Journal, installdir.State}, j.paths()...) {
		if err := atomicfile.CheckNoSymlink(s.dir, filepath.Join(s.dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	return nil
}

// fileHash returns the content hash and permission of the regular file p
// below --dir; ok is false when there is none, or a symbolic link is on
// the way to it or at it. The file is hashed as it is read, in constant
// memory, whatever its size.
func (s *Store) fileHash(p string) (hash string, mode fs.FileMode, ok bool) {
	f, err := atomicfile.OpenFile(s.dir, filepath.Join(s.dir, filepath.FromSlash(p)), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", 0, false
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", 0, false
	}
	return hex.EncodeToString(h.Sum(nil)), st.Mode().Perm(), true
}

// emptyDir tells whether name, below --dir, is an empty directory reached
// without following a symbolic link.
func (s *Store) emptyDir(name string) bool {
	d, err := atomicfile.OpenFile(s.dir, name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}
