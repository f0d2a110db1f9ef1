package nodeimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"
)

// hasher builds a cache key from named parts. Each part is framed with its
// name and length, so moving bytes between parts changes the key.
type hasher struct {
	h hash.Hash
}

func newHasher(kind string) *hasher {
	x := &hasher{h: sha256.New()}
	x.add("kind", kind)
	return x
}

// add mixes a named value into the key.
func (x *hasher) add(name, value string) {
	fmt.Fprintf(x.h, "%d:%s%d:%s", len(name), name, len(value), value)
}

// addFiles mixes a set of files (name -> content) in name order.
func (x *hasher) addFiles(files map[string][]byte) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		x.add("file:"+n, string(files[n]))
	}
}

// sum returns the key: 16 bytes of hex, plenty to tell builds apart.
func (x *hasher) sum() string {
	return hex.EncodeToString(x.h.Sum(nil)[:16])
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// publish renames a finished temporary directory to its cache path. When
// another process published the same content first, the temporary copy is
// removed and the existing one kept.
func publish(tmp, final string) error {
	if err := os.Rename(tmp, final); err != nil {
		if exists(final) {
			return os.RemoveAll(tmp)
		}
		return err
	}
	return nil
}

// scratch returns a fresh temporary directory next to final, removing any
// leftover of an interrupted earlier build.
func scratch(final string) (string, error) {
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		return "", err
	}
	return tmp, os.Mkdir(tmp, 0o755)
}
