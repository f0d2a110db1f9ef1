// Package registry runs the local platform's registry add-on on the host
// and pushes images into it.
//
// The registry is kiln's build of the distribution registry
// (data/components/registry, built by nodeimage.EnsureRegistry), run
// detached beside the API load balancer, like `kiln service-lb`: its files
// are in the cluster's load balancer directory (/var/lib/kiln/lb/<infra ID>
// by default):
//
//	registry.yml   distribution's configuration (Config.YAML)
//	registry.pid   its pid, written once it listens
//	registry.log   its output
//	registry/      its storage: blobs and repositories
//
// It listens on the host's bridge address (the API VIP), where the nodes
// pull, and on 127.0.0.1, where the host pushes, at the same port; the
// clients on the host call it localhost:<port>. Push copies the images of a
// docker-archive into it, each under the name the nodes look it up by
// (Destination).
package registry
