package nodeimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms/tartree"
)

// Export writes the image's root tree as a tarball to path. The suffix
// chooses the compression: .tar.zst (zstd, needs the zstd program),
// .tar.gz or .tgz (gzip), .tar (none).
func (img *Image) Export(ctx context.Context, path string) error {
	compress, err := compressorFor(path)
	if err != nil {
		return &PreconditionError{err}
	}
	// The output's directory must exist: a mistyped --output is the
	// user's to fix, not something to create.
	if st, err := os.Stat(filepath.Dir(path)); err != nil {
		return &PreconditionError{err}
	} else if !st.IsDir() {
		return &PreconditionError{fmt.Errorf("%s is not a directory", filepath.Dir(path))}
	}
	var streamed bool
	err = atomicfile.WriteFunc(path, 0o644, func(f io.Writer) error {
		streamed = true
		w, wait, err := compress(ctx, f)
		if err != nil {
			return err
		}
		tw := tar.NewWriter(w)
		err = tartree.Write(ctx, tw, img.RootFS)
		if err == nil {
			err = tw.Close()
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if werr := wait(); err == nil {
			err = werr
		}
		return err
	})
	if err != nil && !streamed {
		// The file could not even be created at path.
		return &PreconditionError{err}
	}
	if err != nil {
		return fmt.Errorf("exporting the node image to %s: %w", path, err)
	}
	return nil
}

// compressor wraps out; wait ends any helper process after the writer is
// closed.
type compressor func(ctx context.Context, out io.Writer) (w io.WriteCloser, wait func() error, err error)

func compressorFor(path string) (compressor, error) {
	switch {
	case strings.HasSuffix(path, ".tar.zst"):
		return zstdCompressor, nil
	case strings.HasSuffix(path, ".tar.gz"), strings.HasSuffix(path, ".tgz"):
		return func(_ context.Context, out io.Writer) (io.WriteCloser, func() error, error) {
			return gzip.NewWriter(out), func() error { return nil }, nil
		}, nil
	case strings.HasSuffix(path, ".tar"):
		return func(_ context.Context, out io.Writer) (io.WriteCloser, func() error, error) {
			return nopCloser{out}, func() error { return nil }, nil
		}, nil
	}
	return nil, fmt.Errorf("%s: unknown archive type (use .tar.zst, .tar.gz, .tgz or .tar)", path)
}

// zstdCmd compresses standard input to standard output on every core.
func zstdCmd() Command {
	return Command{Path: "zstd", Args: []string{"-q", "-T0", "-3", "-c"}}
}

func zstdCompressor(ctx context.Context, out io.Writer) (io.WriteCloser, func() error, error) {
	c := zstdCmd()
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Stdout = out
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("zstd: %w", err)
	}
	return in, cmd.Wait, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
