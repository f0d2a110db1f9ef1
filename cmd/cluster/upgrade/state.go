package upgrade

import (
	"maps"
	"slices"

	"github.com/kiln-project/kiln/assets/release"
)

// Component names a piece of the cluster that an upgrade changes.
type Component string

// The components an upgrade changes, in the order a node's are listed.
const (
	// Etcd is a master's etcd member.
	Etcd Component = "etcd"
	// KubeAPIServer is a master's API server.
	KubeAPIServer Component = "kube-apiserver"
	// KubeControllerManager is a master's controller manager; it talks
	// to its own master's API server only (https://localhost:6443).
	KubeControllerManager Component = "kube-controller-manager"
	// KubeScheduler is a master's scheduler; it talks to its own
	// master's API server only.
	KubeScheduler Component = "kube-scheduler"
	// Kubelet is a node's kubelet; it talks to every API server, through
	// the load balancer.
	Kubelet Component = "kubelet"
	// KubeProxy is the kube-proxy DaemonSet; it talks to every API
	// server, through the load balancer.
	KubeProxy Component = "kube-proxy"
	// CoreDNS is the cluster DNS Deployment.
	CoreDNS Component = "coredns"
)

// masterComponents are the components a master has beside its kubelet.
var masterComponents = []Component{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}

// Node is one node of the cluster and the versions its components run.
type Node struct {
	// Name is the node's name, its machine's name.
	Name string
	// Master is true for a master: it runs an etcd member and a control
	// plane.
	Master bool
	// Versions are the versions of the node's components: Kubelet on
	// every node, and masterComponents on a master. A missing or zero
	// version is not known.
	Versions map[Component]release.Version
}

// State is the versions a cluster runs.
type State struct {
	// Nodes are the cluster's nodes, in any order.
	Nodes []Node
	// Addons are the versions of the cluster-wide components, KubeProxy
	// and CoreDNS.
	Addons map[Component]release.Version
	// EtcdLeader names the master whose etcd member leads, when known:
	// the plan changes it last, so that leadership moves once.
	EtcdLeader string
}

// clone is a deep copy of s, for the plan to change step by step.
func (s State) clone() State {
	c := State{Addons: maps.Clone(s.Addons), EtcdLeader: s.EtcdLeader}
	if c.Addons == nil {
		c.Addons = map[Component]release.Version{}
	}
	for _, n := range s.Nodes {
		n.Versions = maps.Clone(n.Versions)
		if n.Versions == nil {
			n.Versions = map[Component]release.Version{}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

// node returns the node named name, or nil.
func (s *State) node(name string) *Node {
	i := slices.IndexFunc(s.Nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return nil
	}
	return &s.Nodes[i]
}

// masters returns the masters of s in the order they are upgraded: by
// name, the etcd leader last.
func (s State) masters() []Node {
	return s.ordered(true)
}

// workers returns the workers of s by name.
func (s State) workers() []Node {
	return s.ordered(false)
}

func (s State) ordered(master bool) []Node {
	var out []Node
	for _, n := range s.Nodes {
		if n.Master == master {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Node) int {
		al, bl := a.Name == s.EtcdLeader, b.Name == s.EtcdLeader
		switch {
		case al && !bl:
			return 1
		case bl && !al:
			return -1
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
