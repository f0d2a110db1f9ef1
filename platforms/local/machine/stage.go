package machine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// StageTree puts the host files of files (paths inside the tree, relative,
// to their host sources) at nodelayout.ReleasesDir/name inside machine
// machine, a plain host directory bound there (bindTargets): hard links
// where the file system allows, else copies. The tree is built under a
// temporary name and renamed into place, so the machine sees all of it or
// nothing; a tree there already is left as it is.
func (m *Manager) StageTree(ctx context.Context, machine, name string, files map[string]string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("staging %q into machine %s: not a plain name", name, machine)
	}
	if _, err := m.State(ctx, machine); err != nil {
		return err
	}
	root := filepath.Join(m.dir(machine), hostBindDir(nodelayout.ReleasesDir))
	if st, err := os.Lstat(root); err != nil || !st.IsDir() {
		return fmt.Errorf("machine %s has no directory bound at %s: it was created by an older kiln or stands for a host", machine, nodelayout.ReleasesDir)
	}
	if err := stageTree(root, name, files); err != nil {
		return fmt.Errorf("staging %s into machine %s: %w", name, machine, err)
	}
	return nil
}

// stageTree builds the tree name in root from files (StageTree).
func stageTree(root, name string, files map[string]string) error {
	dest := filepath.Join(root, name)
	if _, err := os.Lstat(dest); err == nil {
		return nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(root, "."+name+".staging")
	if err := freshDir(tmp); err != nil {
		return err
	}
	for rel, src := range files {
		if !filepath.IsLocal(rel) {
			os.RemoveAll(tmp)
			return fmt.Errorf("%q is not a path inside it", rel)
		}
		to := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := linkOrCopy(src, to, 0o755); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	return os.Rename(tmp, dest)
}
