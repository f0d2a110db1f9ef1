package platforms

import (
	"errors"
	"path/filepath"
)

// CacheDir returns kiln's cache directory, where node images, built engines
// and component builds are kept: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln,
// else $HOME/.cache/kiln. getenv is os.Getenv outside tests.
func CacheDir(getenv func(string) string) (string, error) {
	if d := getenv("KILN_CACHE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "kiln"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "kiln"), nil
	}
	return "", errors.New("cannot choose kiln's cache directory: set KILN_CACHE_DIR, XDG_CACHE_HOME or HOME")
}
