package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// consumedMode is the mode of every copy in installdir.Consumed, whatever the
// original's: install-config.yaml holds the pull secret, manifests may hold
// Secrets, and the user's 0644 must not outlive the file it was set on.
const consumedMode fs.FileMode = 0o600

// Target is a named list of writable assets: what one `kiln create`
// subcommand writes into --dir.
type Target struct {
	// Name is the subcommand, e.g. "ignition-configs".
	Name string
	// Assets are written to --dir.
	Assets []WritableAsset
}

// Persist fetches the target's assets, then writes their files into --dir,
// consumes the files of the other assets it read from --dir (each is moved
// to .kiln/consumed/<path>: ignition-configs consumes install-config.yaml
// and the manifests) and saves the state file. Every value is computed
// before the first write, so an error in any asset leaves --dir untouched.
// The writes are recorded in a journal first (installdir.Journal), so a run
// killed while writing is finished by the next one: --dir never holds a mix
// of two runs (docs/crash-safety.md).
func (s *Store) Persist(ctx context.Context, t Target) error {
	assets := make([]Asset, len(t.Assets))
	for i, a := range t.Assets {
		assets[i] = a
	}
	if err := s.Fetch(ctx, assets...); err != nil {
		return err
	}
	inTarget := map[string]bool{}
	owner := map[string]string{}
	for _, a := range t.Assets {
		inTarget[a.ID()] = true
		for _, f := range a.Files() {
			if !fs.ValidPath(f.Path) || f.Path == "." {
				return fmt.Errorf("asset %s: file path %q is not relative to --dir", a.ID(), f.Path)
			}
			if o, ok := owner[f.Path]; ok && o != a.ID() {
				return fmt.Errorf("assets %s and %s both write %s", o, a.ID(), f.Path)
			}
			owner[f.Path] = a.ID()
		}
	}
	j := &journal{Version: journalVersion, Target: t.Name, Started: time.Now().UTC()}
	for _, a := range t.Assets {
		n := s.node(a.ID())
		disk := map[string]string{}
		for _, f := range a.Files() {
			h, mode, ok := s.fileHash(f.Path)
			disk[f.Path] = hashBytes(f.Data)
			if ok && h == disk[f.Path] && mode == ModeOf(f) {
				continue
			}
			j.Writes = append(j.Writes, journalFile{Path: f.Path, Mode: ModeOf(f), Data: f.Data, Was: h})
		}
		n.entry.Disk = disk
		n.onDisk = nil
	}
	consumes, err := s.consumed(inTarget)
	if err != nil {
		return err
	}
	j.Consumes = consumes
	st, err := s.newState()
	if err != nil {
		return err
	}
	if j.State, err = st.encode(); err != nil {
		return err
	}
	old, _ := ReadFile(s.dir, installdir.State, StateInput)
	if len(j.Writes) == 0 && len(j.Consumes) == 0 && string(old) == string(j.State) {
		return nil // nothing changed: leave --dir (and every mtime) alone
	}
	if err := s.exclusive(func() error { return s.commit(j) }); err != nil {
		return err
	}
	// The rest of the command reads the state it just wrote (FromState),
	// through this same store.
	s.state = st
	return nil
}

// consumed lists the files of writable assets read from --dir this run, and
// not part of the target, which Persist moves into installdir.Consumed.
func (s *Store) consumed(inTarget map[string]bool) ([]journalFile, error) {
	s.mu.Lock()
	ids := slices.Sorted(maps.Keys(s.nodes))
	s.mu.Unlock()
	var out []journalFile
	for _, id := range ids {
		n := s.node(id)
		if inTarget[id] || len(n.onDisk) == 0 {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(n.onDisk)) {
			data, err := ReadFile(s.dir, p, inputOf(n.asset))
			if err != nil {
				return nil, err
			}
			out = append(out, journalFile{Path: p, Mode: consumedMode, Data: data})
		}
		n.onDisk = nil
	}
	return out, nil
}

// enforceConsumedMode sets every copy in installdir.Consumed that others may read
// back to consumedMode (an older kiln kept the original's mode) and returns
// their paths relative to dir. It follows no symbolic link below dir: a
// link on the way to installdir.Consumed is an *atomicfile.SymlinkError, and each
// copy is changed through a descriptor opened without following one.
func enforceConsumedMode(dir string) ([]string, error) {
	root := filepath.Join(dir, filepath.FromSlash(installdir.Consumed))
	if err := atomicfile.CheckNoSymlink(dir, root); err != nil {
		return nil, err
	}
	var fixed []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipAll
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&^consumedMode == 0 {
			return err
		}
		f, err := atomicfile.OpenFile(dir, p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Chmod(consumedMode); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fixed = append(fixed, filepath.ToSlash(rel))
		return nil
	})
	return fixed, err
}

// newState is the state file's new content: the previous state updated with
// every node resolved.
func (s *Store) newState() (*State, error) {
	st := &State{Version: stateVersion, Assets: map[string]*StateEntry{}}
	maps.Copy(st.Assets, s.state.Assets)
	s.mu.Lock()
	for id, n := range s.nodes {
		if n.err == nil && n.entry != nil {
			st.Assets[id] = n.entry
		}
	}
	s.mu.Unlock()
	return st, nil
}

// encode is st as the state file holds it.
func (st *State) encode() ([]byte, error) {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
