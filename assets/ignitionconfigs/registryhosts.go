package ignitionconfigs

import (
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
)

// registryHost is one containerd hosts.toml of a node (common.bu): the
// first host containerd tries for one registry.
type registryHost struct {
	// Dir is the registry's directory in /etc/containerd/certs.d: the
	// name images give it.
	Dir string
	// URL is the cluster's registry as the nodes reach it, with the
	// mirrored registry's name as the API root when OverridePath is set.
	URL string
	// OverridePath makes URL's path the API root (/v2/<registry>), where
	// containerd would otherwise append /v2.
	OverridePath bool
}

// registryHosts returns the hosts.toml files of the cluster's registry: one
// for its own name, which leads to it over plain HTTP, and one per
// mirrored registry, which tries it first. None without the registry.
func registryHosts(c *types.Config) []registryHost {
	r, ok := configs.ImageRegistry(c)
	if !ok {
		return nil
	}
	base := "http://" + r.Endpoint.String()
	hosts := []registryHost{{Dir: r.Name, URL: base}}
	for _, m := range r.Mirrors {
		hosts = append(hosts, registryHost{Dir: m, URL: base + "/v2/" + m, OverridePath: true})
	}
	return hosts
}
