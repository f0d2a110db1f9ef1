package types

import (
	"net/netip"
	"strconv"
)

// ImageRegistry is the cluster's image registry after defaulting: the local
// platform's registry add-on, which runs on the host.
type ImageRegistry struct {
	// Name is how the host and the pods name it in image references:
	// "localhost:<port>". Clients on the host reach it there over plain
	// HTTP; each node's containerd maps the name to Endpoint.
	Name string
	// Endpoint is where the nodes reach it: the host's address on the
	// bridge (the API VIP) at the same port.
	Endpoint netip.AddrPort
	// Mirrors are the registries whose images the nodes look up in it
	// first, each under its own name as the first path component
	// (localhost:<port>/registry.k8s.io/pause:3.10.2).
	Mirrors []string
}

// RegistryMirrors are the registries the registry add-on mirrors: kiln's
// own images (kiln.local), the Kubernetes project's (the conformance
// suite's among them) and Docker Hub's, where an image without a registry
// name comes from.
func RegistryMirrors() []string {
	return []string{"kiln.local", "registry.k8s.io", "docker.io"}
}

// RegistryAt returns the registry whose endpoint for the nodes is
// endpoint: the host calls it localhost at the same port.
func RegistryAt(endpoint netip.AddrPort) ImageRegistry {
	return ImageRegistry{
		Name:     "localhost:" + strconv.Itoa(int(endpoint.Port())),
		Endpoint: endpoint,
		Mirrors:  RegistryMirrors(),
	}
}
