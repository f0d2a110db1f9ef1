package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/kiln-project/kiln/platforms/tartree"
)

// PushDir copies the local directory src to the absolute path dir on the
// host at address, as root: one tar stream over the SSH session, unpacked
// beside dir and renamed into place, so dir is the whole of src or what it
// was before (a dir there already is replaced). Files keep their modes and
// belong to root; links stay links. Cancelling ctx cuts the stream. sent, when not nil, is told the bytes
// of the stream sent so far, as they go.
func (c *Client) PushDir(ctx context.Context, address, src, dir string, sent func(int64)) error {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" || strings.ContainsAny(dir, "'\n\\\x00") {
		return fmt.Errorf("pushing to %q: not a clean absolute path", dir)
	}
	cl, err := c.Dial(ctx, address)
	if err != nil {
		return err
	}
	defer cl.Close()
	s, err := cl.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	stdin, err := s.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	s.Stderr = &stderr
	tmp := dir + ".kiln-tmp"
	// Only a stream that reached its end marker replaces dir.
	script := fmt.Sprintf("set -e; trap \"rm -rf '%[1]s'\" EXIT; rm -rf '%[1]s'; mkdir -p '%[1]s'; tar -x -f - -C '%[1]s' --no-same-owner; "+
		"if [ ! -f '%[1]s/%[3]s' ]; then echo 'the stream ended early' >&2; exit 1; fi; "+
		"rm '%[1]s/%[3]s'; rm -rf '%[2]s'; mv '%[1]s' '%[2]s'", tmp, dir, endMarker)
	if err := s.Start(c.wrap(script)); err != nil {
		return err
	}
	werr := writeTar(ctx, &countingWriter{w: stdin, sent: sent}, src)
	cerr := stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case <-ctx.Done():
		cl.Close()
		return ctx.Err()
	case err = <-done:
	}
	if werr != nil {
		return fmt.Errorf("pushing %s: %w", src, werr)
	}
	if err == nil {
		err = cerr
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("unpacking into %s: %w: %s", dir, err, msg)
		}
		return fmt.Errorf("unpacking into %s: %w", dir, err)
	}
	return nil
}

// endMarker is the last entry of a push's stream: a host that did not get
// it got a stream cut short, and keeps what it had.
const endMarker = ".kiln-push-complete"

// wrap runs script under /bin/sh as root.
func (c *Client) wrap(script string) string {
	quoted := "'" + strings.ReplaceAll(script, "'", `'\''`) + "'"
	if c.cfg.User == "root" {
		return "/bin/sh -c " + quoted
	}
	return "sudo -n /bin/sh -c " + quoted
}

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
