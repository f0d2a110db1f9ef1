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
	data, err := graph.ReadFile(dir, ShapeFile, graph.OtherInput)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, false, fmt.Errorf("%s: %w", ShapeFile, err)
	}
	return rec, true, nil
}

// SaveShape writes dir's shape record atomically, following no symbolic
// link in dir.
func SaveShape(dir string, rec ShapeRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	w := &atomicfile.Writer{Root: dir}
	if err := w.MkdirAll(filepath.Join(dir, filepath.FromSlash(path.Dir(ShapeFile))), 0o700); err != nil {
		return err
	}
	return w.Write(filepath.Join(dir, filepath.FromSlash(ShapeFile)), append(data, '\n'), 0o600)
}
