package ignitionconfigs

import (
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
)

// registryHost is one containerd hosts.toml of a node (common.bu): the
// hosts containerd tries, in order, for one registry before the registry
// itself.
type registryHost struct {
	// Dir is the registry's directory in /etc/containerd/certs.d: the
	// name images give it.
	Dir string
	// Hosts are tried in order.
	Hosts []mirrorHost
}

// mirrorHost is one [host."URL"] of a hosts.toml.
type mirrorHost struct {
	// URL is the host, with the API root as its path when OverridePath is
	// set.
	URL string
	// OverridePath makes URL's path the API root (/v2/<prefix>), where
	// containerd would otherwise append /v2.
	OverridePath bool
	// Comment says whose host it is.
	Comment string
}

// registryHosts returns the hosts.toml files of the nodes: with the
// registry add-on, one for the cluster registry's own name, which leads to
// it over plain HTTP, and one per registry it mirrors, which tries it
// first; then install-config's imageMirrors, tried next, over HTTPS. A
// registry's own host comes last, as containerd always tries it after the
// listed ones.
func registryHosts(c *types.Config) []registryHost {
	var hosts []registryHost
	index := map[string]int{}
	add := func(dir string, h mirrorHost) {
		i, ok := index[dir]
		if !ok {
			i = len(hosts)
			index[dir] = i
			hosts = append(hosts, registryHost{Dir: dir})
		}
		hosts[i].Hosts = append(hosts[i].Hosts, h)
	}
	if r, ok := configs.ImageRegistry(c); ok {
		base := "http://" + r.Endpoint.String()
		const addon = "kiln's registry add-on (docs/registry.md)"
		add(r.Name, mirrorHost{URL: base, Comment: addon})
		for _, m := range r.Mirrors {
			add(m, mirrorHost{URL: base + "/v2/" + m, OverridePath: true, Comment: addon})
		}
	}
	for _, m := range c.ImageMirrors {
		for _, mirror := range m.Mirrors {
			host, prefix, _ := strings.Cut(mirror, "/")
			h := mirrorHost{URL: "https://" + host, Comment: "imageMirrors of install-config"}
			if prefix != "" {
				h.URL, h.OverridePath = h.URL+"/v2/"+prefix, true
			}
			add(m.Source, h)
		}
	}
	return hosts
}
