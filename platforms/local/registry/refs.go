package registry

import (
	"fmt"
	"slices"
	"strings"
)

// dockerHub is the registry of a reference without a registry name.
const dockerHub = "docker.io"

// reference is an image reference split as the distribution API uses it.
type reference struct {
	// Registry is the registry's name (docker.io for Docker Hub).
	Registry string
	// Repository is the path in the registry (library/nginx for nginx).
	Repository string
	// Tag is the tag; latest when the reference names none.
	Tag string
}

// parseReference splits a tagged reference with Docker's rules: the first
// path component names the registry when it holds a dot or a colon or is
// localhost; otherwise the registry is Docker Hub, where a one-component
// name is in library/. A reference by digest is refused: archives tag
// their images.
func parseReference(ref string) (reference, error) {
	if ref == "" || strings.ContainsAny(ref, "@ ") {
		return reference{}, fmt.Errorf("image reference %q: want [registry/]repository[:tag]", ref)
	}
	r := reference{Registry: dockerHub, Repository: ref, Tag: "latest"}
	if first, rest, ok := strings.Cut(ref, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		r.Registry, r.Repository = first, rest
	}
	if i := strings.LastIndexByte(r.Repository, ':'); i >= 0 {
		r.Repository, r.Tag = r.Repository[:i], r.Repository[i+1:]
	}
	if r.Registry == "index.docker.io" {
		r.Registry = dockerHub
	}
	if r.Registry == dockerHub && !strings.Contains(r.Repository, "/") {
		r.Repository = "library/" + r.Repository
	}
	if r.Repository == "" || r.Tag == "" || strings.HasPrefix(r.Repository, "/") || strings.HasSuffix(r.Repository, "/") {
		return reference{}, fmt.Errorf("image reference %q: want [registry/]repository[:tag]", ref)
	}
	return r, nil
}

// Names says which references a registry holds.
type Names struct {
	// Self is the registry's own name, localhost:<port>.
	Self string
	// Mirrors are the registries it mirrors.
	Mirrors []string
}

// destination returns the repository and tag ref is stored under: a
// reference to the registry itself as it is; one to a mirrored registry
// under that registry's name as the first path component, where the
// nodes' containerd looks it up (registry.k8s.io/pause:3.10.2 becomes
// repository registry.k8s.io/pause); ok is false for any other registry,
// whose images the nodes would never look up here.
func (n Names) destination(ref string) (repo, tag string, ok bool, err error) {
	r, err := parseReference(ref)
	if err != nil {
		return "", "", false, err
	}
	switch {
	case r.Registry == n.Self:
		return r.Repository, r.Tag, true, nil
	case slices.Contains(n.Mirrors, r.Registry):
		return r.Registry + "/" + r.Repository, r.Tag, true, nil
	}
	return "", "", false, nil
}
