package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
)

// ShapeFile is where `kiln scale cluster` records, in --dir, the machines a
// cluster runs once its shape differs from the install-config's replica
// counts; the install-config in the state file is never changed, since
// every certificate and config depends on it.
const ShapeFile = ".kiln/shape.json"

// ShapeRecord is the content of ShapeFile: the machines of the cluster and
// the journal of a change under way.
type ShapeRecord struct {
	machines.Shape
	// Removing names the machines a scale is taking out of the cluster:
	// still in Shape (their machine may still exist), their etcd member,
	// load balancer backend or Node may be gone already. A re-run finishes
	// their removal first.
	Removing []string `json:"removing,omitempty"`
	// Joining holds the bootstrap token (<id>.<secret>) of each machine a
	// scale is adding, until its Node registered: a re-run makes the same
	// token valid again for the machine whose config carries it. A secret:
	// the file is 0600.
	Joining map[string]string `json:"joining,omitempty"`
}

// LoadShape reads dir's shape record; found is false when there is none.
func LoadShape(dir string) (rec ShapeRecord, found bool, err error) {
	found, err = LoadRecord(dir, ShapeFile, &rec)
	return rec, found, err
}

// SaveShape writes dir's shape record atomically, following no symbolic
// link in dir.
func SaveShape(dir string, rec ShapeRecord) error {
	return SaveRecord(dir, ShapeFile, rec)
}

// LoadRecord reads the JSON record file (slash-separated, relative to dir:
// one of kiln's own records in .kiln/) into v, following no symbolic link
// in dir; found is false when there is none.
func LoadRecord(dir, file string, v any) (found bool, err error) {
	data, err := graph.ReadFile(dir, file, graph.OtherInput)
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
