package nodeimage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kiln-project/kiln/assets/release"
)

// NotCachedError means a program kiln builds with the node image is not in
// the cache yet: the user builds it with `kiln build node-image`.
type NotCachedError struct {
	// Program names it with its version, e.g. "kubectl v1.36.3".
	Program string
	// Dir is the cache directory looked in.
	Dir string
}

// Error says what is missing, where, and how to build it.
func (e *NotCachedError) Error() string {
	return fmt.Sprintf("%s is not in kiln's cache %s: build it with `kiln build node-image` "+
		"(which builds the cluster's components from source; needs Go, see docs/node-image.md)", e.Program, e.Dir)
}

// Kubectl returns the kubectl of Kubernetes version (e.g. "v1.36.3") in the
// cache at cacheDir: bin/kubectl of a kubernetes component entry whose
// module requires that release, else the kubectl in a cached node image of
// that release (a host that got the image without building it has no
// component entries). The entry's key also hashes the Go toolchain that
// built it; any toolchain's build will do, the newest if there are several.
// No such binary is a *NotCachedError.
func Kubectl(cacheDir, version string) (string, error) {
	entries, err := filepath.Glob(filepath.Join(cacheDir, "components", "kubernetes-*"))
	if err != nil {
		return "", err
	}
	var (
		found  string
		newest time.Time
	)
	for _, dir := range entries {
		bin := filepath.Join(dir, "bin", "kubectl")
		st, err := os.Stat(bin)
		if err != nil || !st.Mode().IsRegular() || !requiresKubernetes(filepath.Join(dir, "src", "go.mod"), version) {
			continue
		}
		if found == "" || st.ModTime().After(newest) {
			found, newest = bin, st.ModTime()
		}
	}
	if found == "" {
		found = imageKubectl(filepath.Join(cacheDir, "images"), version)
	}
	if found == "" {
		return "", &NotCachedError{Program: "kubectl " + version, Dir: cacheDir}
	}
	return found, nil
}

// imageKubectl returns the kubectl of the newest complete node image of
// Kubernetes version under dir; "" when there is none.
func imageKubectl(dir, version string) string {
	bin := func(img *Image) string { return filepath.Join(img.RootFS, release.BinDir, "kubectl") }
	img := newestImage(dir, func(img *Image) bool {
		st, err := os.Stat(bin(img))
		return img.Release.Kubernetes == version && err == nil && st.Mode().IsRegular()
	})
	if img == nil {
		return ""
	}
	return bin(img)
}

// requiresKubernetes reports whether the go.mod at path requires
// k8s.io/kubernetes at version, in a require line or block (`go build
// -mod=mod` rewrites the rendered go.mod.in, so only this line is stable).
func requiresKubernetes(path, version string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	want := []string{"k8s.io/kubernetes", version}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if slices.Equal(f, want) {
			return true
		}
	}
	return false
}
