package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// LoadRecord reads the JSON record file (slash-separated, relative to dir:
// one of kiln's own records in .kiln/) into v, following no symbolic link
// in dir; found is false when there is none.
func LoadRecord(dir, file string, v any) (found bool, err error) {
	data, err := ReadFile(dir, file, OtherInput)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", file, err)
	}
	return true, nil
}

// SaveRecord writes v as the JSON record file of dir: 0600 (a record may
// hold a secret), atomically, following no symbolic link in dir, its
// directory created 0700.
func SaveRecord(dir, file string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	w := &atomicfile.Writer{Root: dir}
	if err := w.MkdirAll(filepath.Join(dir, filepath.FromSlash(path.Dir(file))), 0o700); err != nil {
		return err
	}
	return w.Write(filepath.Join(dir, filepath.FromSlash(file)), append(data, '\n'), 0o600)
}
