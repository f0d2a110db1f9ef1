package machine

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// maxNodeFile bounds what ReadFile reads: the files kiln edits on a node
// are manifests and configs, far smaller.
const maxNodeFile = 4 << 20

// rootOf is the mounted root of a running machine, and the host path of
// inside (an absolute path in the machine) below it.
func (m *Manager) rootOf(ctx context.Context, name, inside string) (root, host string, err error) {
	st, err := m.State(ctx, name)
	if err != nil {
		return "", "", err
	}
	if st != StateRunning {
		return "", "", fmt.Errorf("machine %s is %s", name, st)
	}
	if !path.IsAbs(inside) || path.Clean(inside) != inside {
		return "", "", &InvalidError{fmt.Errorf("%q is not a clean absolute path", inside)}
	}
	root = filepath.Join(m.dir(name), "root")
	return root, filepath.Join(root, filepath.FromSlash(inside)), nil
}

// ReadFile returns the file at inside (an absolute path in the running
// machine), read from its root on the host, following no link below it:
// what the machine put there cannot point kiln elsewhere.
func (m *Manager) ReadFile(ctx context.Context, name, inside string) ([]byte, error) {
	root, host, err := m.rootOf(ctx, name, inside)
	if err != nil {
		return nil, err
	}
	f, err := atomicfile.OpenFile(root, host, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxNodeFile {
		return nil, fmt.Errorf("machine %s: %s is not a regular file of at most %d bytes", name, inside, maxNodeFile)
	}
	return io.ReadAll(io.LimitReader(f, maxNodeFile))
}

// WriteFile writes the file at inside in the running machine with mode,
// its content streamed by write: into its root on the host, atomically
// (a machine reading it sees the old file or the new one) and following no
// link below the root.
func (m *Manager) WriteFile(ctx context.Context, name, inside string, mode fs.FileMode, write func(io.Writer) error) error {
	root, host, err := m.rootOf(ctx, name, inside)
	if err != nil {
		return err
	}
	w := &atomicfile.Writer{Root: root}
	if err := w.WriteFunc(host, mode, write); err != nil {
		return fmt.Errorf("machine %s: writing %s: %w", name, inside, err)
	}
	return nil
}
