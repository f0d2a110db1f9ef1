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

// Hasher builds a cache key from named parts. Each part is framed with its
// name and length, so moving bytes between parts changes the key.
type Hasher struct {
	h hash.Hash
}

// NewHasher returns a Hasher whose key starts with kind, the domain of
// the key: a string that names what is keyed and its version.
func NewHasher(kind string) *Hasher {
	x := &Hasher{h: sha256.New()}
	x.Add("kind", kind)
	return x
}

// Add mixes a named value into the key.
func (x *Hasher) Add(name, value string) {
	fmt.Fprintf(x.h, "%d:%s%d:%s", len(name), name, len(value), value)
}

// addFiles mixes a set of files (name -> content) in name order.
func (x *Hasher) addFiles(files map[string][]byte) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		x.Add("file:"+n, string(files[n]))
	}
}

// Sum returns the key: 16 bytes of hex, plenty to tell builds apart.
func (x *Hasher) Sum() string {
	return hex.EncodeToString(x.h.Sum(nil)[:16])
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// Publish renames a finished temporary directory to its cache path. When
// another process published the same content first, the temporary copy is
// removed and the existing one kept.
func Publish(tmp, final string) error {
	if err := os.Rename(tmp, final); err != nil {
		if exists(final) {
			return os.RemoveAll(tmp)
		}
		return err
	}
	return nil
}

// Scratch returns a fresh temporary directory next to final, removing any
// leftover of an interrupted earlier build.
func Scratch(final string) (string, error) {
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		return "", err
	}
	return tmp, os.Mkdir(tmp, 0o755)
}
