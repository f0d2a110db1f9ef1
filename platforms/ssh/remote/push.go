package remote

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/kiln-project/kiln/platforms/shellquote"
	"github.com/kiln-project/kiln/platforms/tartree"
)

// PushDir copies the local directory src to the absolute path dir on the
// host at address, as root: one tar stream over the SSH session, unpacked
// beside dir and renamed into place, so dir is the whole of src or what it
// was before (a dir there already is replaced). Files keep their modes and
// belong to root; links stay links. Cancelling ctx cuts the stream. sent,
// when not nil, is told the bytes of the stream sent so far, as they go.
func (c *Client) PushDir(ctx context.Context, address, src, dir string, sent func(int64)) error {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" || strings.ContainsAny(dir, "'\n\\\x00") {
		return fmt.Errorf("pushing to %q: not a clean absolute path", dir)
	}
	tmp := dir + ".kiln-tmp"
	// Only a stream that reached its end marker replaces dir.
	script := fmt.Sprintf("set -e; trap \"rm -rf '%[1]s'\" EXIT; rm -rf '%[1]s'; mkdir -p '%[1]s'; tar -x -f - -C '%[1]s' --no-same-owner; "+
		"if [ ! -f '%[1]s/%[3]s' ]; then echo 'the stream ended early' >&2; exit 1; fi; "+
		"rm '%[1]s/%[3]s'; rm -rf '%[2]s'; mv '%[1]s' '%[2]s'", tmp, dir, endMarker)
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeTar(ctx, &countingWriter{w: pw, sent: sent}, src)
		pw.CloseWithError(err) // nil: the stream ends
		written <- err
	}()
	_, err := c.run(ctx, address, c.asRoot("/bin/sh -c "+shellquote.Quote(script)), pr)
	pr.Close() // a host that stopped reading unblocks the writer
	werr := <-written
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case werr != nil && !errors.Is(werr, io.ErrClosedPipe):
		return fmt.Errorf("pushing %s: %w", src, werr)
	case err != nil:
		return fmt.Errorf("unpacking into %s: %w", dir, err)
	}
	return nil
}

// endMarker is the last entry of a push's stream: a host that did not get
// it got a stream cut short, and keeps what it had.
const endMarker = ".kiln-push-complete"

// writeTar writes the tree src as a tar stream (tartree.Write), then
// endMarker.
func writeTar(ctx context.Context, w io.Writer, src string) error {
	tw := tar.NewWriter(w)
	if err := tartree.Write(ctx, tw, src); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: endMarker, Typeflag: tar.TypeReg, Mode: 0o600}); err != nil {
		return err
	}
	return tw.Close()
}

// countingWriter tells sent how many bytes went through it.
type countingWriter struct {
	w    io.Writer
	n    int64
	sent func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.sent != nil {
		c.sent(c.n)
	}
	return n, err
}
