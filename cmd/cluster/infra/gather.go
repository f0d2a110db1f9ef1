package infra

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
)

// Gather collects the bootstrap machine's and the masters' diagnostics into
// dir/log-bundle-<time>.tar.gz and returns its path.
func Gather(ctx context.Context, dir string, t Target, prov platforms.Provisioner, now time.Time) (string, error) {
	g, ok := prov.(platforms.Gatherer)
	if !ok {
		return "", exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot gather logs", t.Platform))
	}
	tmp, err := os.MkdirTemp("", "kiln-gather-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	gatherErr := exitcode.With(exitcode.Infrastructure, g.Gather(ctx, dir, t.InfraID, tmp))
	out := filepath.Join(dir, "log-bundle-"+now.UTC().Format("20060102-150405")+".tar.gz")
	w := &atomicfile.Writer{Root: dir}
	if err := w.WriteFunc(out, 0o600, func(f io.Writer) error { return tarGz(tmp, f) }); err != nil {
		return "", err
	}
	return out, gatherErr
}

// tarGz writes the tree under src into f as a gzip-compressed tar. The
// bundle is 0600: logs may name secrets' paths and hold cluster details.
func tarGz(src string, f io.Writer) error {
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	walkErr := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == src {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil || !info.Mode().IsRegular() {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	for _, c := range []io.Closer{tw, zw} {
		if err := c.Close(); err != nil && walkErr == nil {
			walkErr = err
		}
	}
	return walkErr
}
