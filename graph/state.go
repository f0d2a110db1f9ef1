package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// stateVersion is the format version of the state file.
const stateVersion = 1

// State is the content of the state file: every asset kiln generated or
// loaded for this --dir, keyed by asset ID. It holds secrets; it is 0600.
type State struct {
	// Version is the format version.
	Version int `json:"version"`
	// Assets maps asset IDs to their last value.
	Assets map[string]*StateEntry `json:"assets"`
}

// StateEntry is one asset in the state file.
type StateEntry struct {
	// Hash is the content hash of Value.
	Hash string `json:"hash"`
	// Parents maps each dependency's ID to its Hash when this value was made.
	Parents map[string]string `json:"parents,omitempty"`
	// Disk maps each of the asset's files to the hash of its content as kiln
	// last wrote or read it in --dir; it tells user edits apart.
	Disk map[string]string `json:"disk,omitempty"`
	// Value is the asset's JSON value.
	Value json.RawMessage `json:"value"`
}

// Recorded reports whether data is the content the state last wrote or
// read for file name of asset id: false for a user's edit, or a file the
// state does not know.
func (s *State) Recorded(id, name string, data []byte) bool {
	e := s.Assets[id]
	return e != nil && e.Disk[name] != "" && e.Disk[name] == hashBytes(data)
}

// ReadState reads dir's state file and changes nothing; a missing file is an
// empty state. It is for commands that only report, like `kiln certs`.
func ReadState(dir string) (*State, error) { return readState(dir) }

// readState reads dir's state file; a missing file is an empty state.
func readState(dir string) (*State, error) {
	b, err := ReadFile(dir, installdir.State, StateInput)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: stateVersion, Assets: map[string]*StateEntry{}}, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseState(b, filepath.Join(dir, installdir.State))
}

// ParseState decodes b as a state file, which name names in errors: a
// file of the wrong format version is an error.
func ParseState(b []byte, name string) (*State, error) {
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, &InputError{Err: fmt.Errorf("%s: %w", name, err)}
	}
	if st.Version != stateVersion {
		return nil, &InputError{Err: fmt.Errorf("%s: format version %d, this kiln reads version %d", name, st.Version, stateVersion)}
	}
	if st.Assets == nil {
		st.Assets = map[string]*StateEntry{}
	}
	return st, nil
}

// SeedState makes st, the parsed state file of another --dir (a
// backup's, ParseState), the state of dir, which has none of its own: it
// is written 0600 in one step, as the store writes it. The next store of
// dir resumes from it: assets whose files are missing from dir are taken
// from the state and written again, as after a consumed file;
// graph.WithRenew issues those that must not be kept.
func SeedState(dir string, st *State) error {
	b, err := st.encode()
	if err != nil {
		return err
	}
	w := &atomicfile.Writer{Root: dir}
	return w.Write(filepath.Join(dir, installdir.State), b, stateMode)
}

// retire removes the assets ids from st: their entries, and their place
// among the parents of every other entry. It returns, sorted, the IDs it
// found.
func (st *State) retire(ids []string) []string {
	var dropped []string
	for _, id := range ids {
		if _, ok := st.Assets[id]; ok {
			dropped = append(dropped, id)
			delete(st.Assets, id)
		}
		for _, e := range st.Assets {
			if e != nil {
				delete(e.Parents, id)
			}
		}
	}
	slices.Sort(dropped)
	return dropped
}

// stateMode is the state file's permission: it holds every private key.
const stateMode fs.FileMode = 0o600

// enforceStateMode sets the state file of dir back to 0600 when someone
// widened it; it reports whether it did. The file is opened without
// following a link, and changed through that descriptor.
func enforceStateMode(dir string) (bool, error) {
	f, err := atomicfile.OpenFile(dir, filepath.Join(dir, installdir.State), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Mode().Perm() == stateMode {
		return false, err
	}
	return true, f.Chmod(stateMode)
}

// decodeError is a state entry that does not decode into its asset.
func decodeError(dir, id string, err error) error {
	name := filepath.Join(dir, installdir.State)
	return &InputError{Err: fmt.Errorf("%s: the value of asset %s is damaged (%v); restore %s from a backup, "+
		"or delete its %q entry to have kiln generate %s, and everything made from it, again", name, id, err, name, id, id)}
}
