package remote

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/kiln-project/kiln/platforms/shellquote"
)

// PutFile replaces the file at the absolute path p on the host at address,
// as root, with the size bytes src holds, mode mode: streamed into a new
// file beside p and renamed over it once it holds all of them, so a reader
// sees the old file or the new one, and a stream cut short (kiln killed,
// the connection lost) leaves the old one and nothing else. p's directory
// must exist and no component of it may be a link: root writes through
// none.
func (c *Client) PutFile(ctx context.Context, address, p string, src io.Reader, size int64, mode fs.FileMode) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsAny(p, "\n\x00") {
		return fmt.Errorf("putting %q: not a clean absolute path", p)
	}
	if size < 0 {
		return fmt.Errorf("putting %s: size %d", p, size)
	}
	_, err := c.run(ctx, address, c.asRoot("/bin/sh -c "+shellquote.Quote(putScript(p, size, mode))), io.LimitReader(src, size))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("putting %s: %w", p, err)
	}
	return nil
}

// putScript is the host's side of PutFile.
func putScript(p string, size int64, mode fs.FileMode) string {
	return fmt.Sprintf(`set -e
p=%[1]s
d=$(dirname "$p")
if [ ! -d "$d" ] || [ "$(readlink -f "$d")" != "$d" ] || [ -L "$p" ] || { [ -e "$p" ] && [ ! -f "$p" ]; }; then
	echo "$p: its directory must exist and be no link, and it must be a regular file or absent" >&2; exit 1
fi
tmp=$(mktemp "$d/.kiln-put.XXXXXX")
trap 'rm -f "$tmp"' EXIT
head -c %[2]d > "$tmp"
if [ "$(stat -c %%s "$tmp")" != %[2]d ]; then echo "the stream ended early" >&2; exit 1; fi
chmod %[3]o "$tmp"
sync "$tmp" 2>/dev/null || true
mv -T "$tmp" "$p"
trap - EXIT
`, shellquote.Quote(p), size, mode.Perm())
}
