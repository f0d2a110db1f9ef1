package upgrade

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Journal is the content of installdir.UpgradeJournal.
type Journal struct {
	// To is the Kubernetes version the upgrade moves to.
	To string `json:"to"`
	// Snapshot is the etcd snapshot taken before the first change.
	Snapshot string `json:"snapshot,omitempty"`
	// Begun is the step under way, recorded before its first change and
	// cleared once it is done or rolled back; nil between steps.
	Begun *Begun `json:"begun,omitempty"`
}

// Begun is a step under way.
type Begun struct {
	Step Step `json:"step"`
	// Failed is the failure a rollback of the step is answering, once one
	// began: a re-run finishes the rollback instead of retrying.
	Failed string `json:"failed,omitempty"`
}

// LoadJournal reads dir's journal; found is false when there is none.
func LoadJournal(dir string) (j Journal, found bool, err error) {
	found, err = graph.LoadRecord(dir, installdir.UpgradeJournal, &j)
	return j, found, err
}

// SaveJournal writes dir's journal atomically, following no link in dir.
func SaveJournal(dir string, j Journal) error {
	return graph.SaveRecord(dir, installdir.UpgradeJournal, j)
}

// RemoveJournal removes dir's journal once the upgrade is complete.
func RemoveJournal(dir string) error {
	w := &atomicfile.Writer{Root: dir}
	err := w.Remove(filepath.Join(dir, filepath.FromSlash(installdir.UpgradeJournal)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
