package upgrade

import (
	"fmt"

	"github.com/kiln-project/kiln/assets/release"
)

// The Kubernetes version-skew policy
// (https://kubernetes.io/releases/version-skew-policy/), in minors, and
// etcd's rule for its 3.5 → 3.6 hop.
const (
	// maxAPIServerSkew: the API servers of an HA cluster are at most one
	// minor apart.
	maxAPIServerSkew = 1
	// maxControlPlaneLag: a controller manager or scheduler may be one
	// minor older than the API server it talks to, never newer.
	maxControlPlaneLag = 1
	// maxNodeLag: a kubelet or kube-proxy may be three minors older than
	// the API servers, never newer than the oldest.
	maxNodeLag = 3
	// maxEtcdSkew: etcd members are at most one minor apart.
	maxEtcdSkew = 1
)

// minEtcd35BesideEtcd36 is the oldest etcd 3.5 that may run in a cluster
// with a 3.6 member: 3.5.26 and later understand what 3.6 writes.
var minEtcd35BesideEtcd36 = release.Version{Major: 3, Minor: 5, Patch: 26}

// Violations returns each way s breaks the version-skew policy, as a
// sentence naming the nodes and versions; none when s keeps it. Unknown
// versions are left out of every rule.
func Violations(s State) []string {
	var out []string
	oldestAPI, newestAPI := extremes(s, KubeAPIServer)
	if oldestAPI.node != "" && newestAPI.v.Minors(oldestAPI.v) > maxAPIServerSkew {
		out = append(out, fmt.Sprintf("the API servers are %d minors apart (%s on %s, %s on %s); at most %d",
			newestAPI.v.Minors(oldestAPI.v), oldestAPI.v, oldestAPI.node, newestAPI.v, newestAPI.node, maxAPIServerSkew))
	}
	for _, n := range s.Nodes {
		api := n.Versions[KubeAPIServer]
		for _, c := range []Component{KubeControllerManager, KubeScheduler} {
			v := n.Versions[c]
			if v.IsZero() || api.IsZero() {
				continue
			}
			if v.Minors(api) > 0 {
				out = append(out, fmt.Sprintf("%s: %s %s would be newer than its API server (%s)", n.Name, c, v, api))
			} else if api.Minors(v) > maxControlPlaneLag {
				out = append(out, fmt.Sprintf("%s: %s %s would be %d minors older than its API server (%s); at most %d",
					n.Name, c, v, api.Minors(v), api, maxControlPlaneLag))
			}
		}
		if v := n.Versions[Kubelet]; !v.IsZero() {
			out = append(out, nodeLag(n.Name+": kubelet", v, oldestAPI, newestAPI)...)
		}
	}
	if v := s.Addons[KubeProxy]; !v.IsZero() {
		out = append(out, nodeLag("kube-proxy", v, oldestAPI, newestAPI)...)
	}
	return append(out, etcdViolations(s)...)
}

// versionAt is a component's version and the node that runs it.
type versionAt struct {
	v    release.Version
	node string
}

// extremes returns the oldest and newest known version of c over the
// nodes; node is empty when none is known.
func extremes(s State, c Component) (oldest, newest versionAt) {
	for _, n := range s.Nodes {
		v := n.Versions[c]
		if v.IsZero() {
			continue
		}
		if oldest.node == "" || v.Compare(oldest.v) < 0 {
			oldest = versionAt{v, n.Name}
		}
		if newest.node == "" || v.Compare(newest.v) > 0 {
			newest = versionAt{v, n.Name}
		}
	}
	return oldest, newest
}

// nodeLag applies the kubelet and kube-proxy rule to what, at v: never
// newer than the oldest API server, at most maxNodeLag minors older than
// the newest.
func nodeLag(what string, v release.Version, oldestAPI, newestAPI versionAt) []string {
	if oldestAPI.node == "" {
		return nil
	}
	if v.Minors(oldestAPI.v) > 0 {
		return []string{fmt.Sprintf("%s %s would be newer than the API server on %s (%s)", what, v, oldestAPI.node, oldestAPI.v)}
	}
	if lag := newestAPI.v.Minors(v); lag > maxNodeLag {
		return []string{fmt.Sprintf("%s %s would be %d minors older than the API server on %s (%s); at most %d",
			what, v, lag, newestAPI.node, newestAPI.v, maxNodeLag)}
	}
	return nil
}

// etcdViolations: members at most maxEtcdSkew minors apart, and no 3.5
// member older than minEtcd35BesideEtcd36 beside a 3.6 one.
func etcdViolations(s State) []string {
	var out []string
	oldest, newest := extremes(s, Etcd)
	if oldest.node == "" {
		return nil
	}
	if newest.v.Minors(oldest.v) > maxEtcdSkew {
		out = append(out, fmt.Sprintf("the etcd members are %d minors apart (%s on %s, %s on %s); at most %d",
			newest.v.Minors(oldest.v), etcdString(oldest.v), oldest.node, etcdString(newest.v), newest.node, maxEtcdSkew))
	}
	if newest.v.Compare(release.Version{Major: 3, Minor: 6, Patch: 0}) < 0 {
		return out
	}
	for _, n := range s.Nodes {
		v := n.Versions[Etcd]
		if !v.IsZero() && v.Major == 3 && v.Minor == 5 && v.Compare(minEtcd35BesideEtcd36) < 0 {
			out = append(out, fmt.Sprintf("%s: etcd %s would run beside etcd %s on %s; a 3.5 member needs %s or later beside 3.6",
				n.Name, etcdString(v), etcdString(newest.v), newest.node, etcdString(minEtcd35BesideEtcd36)))
		}
	}
	return out
}

// etcdString is an etcd version as etcd writes it, without the "v".
func etcdString(v release.Version) string {
	if v.IsZero() {
		return v.String()
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}
