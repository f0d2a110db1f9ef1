package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// ConsumedDir is where Persist keeps a copy of each consumed file, below
// --dir: .kiln/consumed/<path>.
const ConsumedDir = ".kiln/consumed"

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
	for _, a := range t.Assets {
		n := s.node(a.ID())
		disk := map[string]string{}
		for _, f := range a.Files() {
			if err := s.writeFile(f); err != nil {
				return err
			}
			disk[f.Path] = hashBytes(f.Data)
		}
		n.entry.Disk = disk
		n.onDisk = nil
	}
	if err := s.consume(inTarget); err != nil {
		return err
	}
	return s.saveState()
}

// writeFile writes f unless --dir already holds exactly it.
func (s *Store) writeFile(f *File) error {
	full := filepath.Join(s.dir, filepath.FromSlash(f.Path))
	mode := ModeOf(f)
	if st, err := os.Stat(full); err == nil && st.Mode().Perm() == mode {
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, f.Data) {
			return nil
		}
	}
	if err := atomicfile.Write(full, f.Data, mode); err != nil {
		return err
	}
	s.log.Debugf("Wrote %s (%o)", f.Path, mode)
	return nil
}

// consume moves the files of writable assets read from --dir this run, and
// not part of the target, into ConsumedDir.
func (s *Store) consume(inTarget map[string]bool) error {
	s.mu.Lock()
	ids := slices.Sorted(maps.Keys(s.nodes))
	s.mu.Unlock()
	for _, id := range ids {
		n := s.node(id)
		if inTarget[id] || len(n.onDisk) == 0 {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(n.onDisk)) {
			if err := s.consumeFile(p); err != nil {
				return err
			}
		}
		n.onDisk = nil
	}
	return nil
}

func (s *Store) consumeFile(p string) error {
	src := filepath.Join(s.dir, filepath.FromSlash(p))
	st, err := os.Stat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	dst := path.Join(ConsumedDir, p)
	if err := atomicfile.Write(filepath.Join(s.dir, filepath.FromSlash(dst)), data, st.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Remove(src); err != nil {
		return err
	}
	// Remove directories the consumed file leaves empty (manifests/).
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if os.Remove(filepath.Join(s.dir, filepath.FromSlash(d))) != nil {
			break
		}
	}
	s.log.Infof("Consumed %s; a copy is in %s", p, dst)
	return nil
}

// saveState writes the previous state updated with every node resolved.
func (s *Store) saveState() error {
	st := &State{Version: stateVersion, Assets: map[string]*StateEntry{}}
	maps.Copy(st.Assets, s.state.Assets)
	s.mu.Lock()
	for id, n := range s.nodes {
		if n.err == nil && n.entry != nil {
			st.Assets[id] = n.entry
		}
	}
	s.mu.Unlock()
	return st.write(s.dir)
}
