package manifests

import (
	"path"

	"github.com/kiln-project/kiln/graph"
)

// StaticPodsDir is the folder of --dir that holds the control plane's
// static pods, one sub-folder per role.
const StaticPodsDir = "static-pods"

// EtcdInitialClusterMarker stands in the masters' etcd manifest for the
// --initial-cluster value, which bootkube fills in when it adds the member.
const EtcdInitialClusterMarker = "__KILN_ETCD_INITIAL_CLUSTER__"

// staticPodTemplates are the control plane's static pods, in start order.
var staticPodTemplates = []string{
	"static-pods/etcd.yaml",
	"static-pods/kube-apiserver.yaml",
	"static-pods/kube-controller-manager.yaml",
	"static-pods/kube-scheduler.yaml",
}

// staticPods is the base of the per-role static pod assets.
type staticPods struct{ fileSet }

// staticPodData is what the static pod templates read.
type staticPodData struct {
	*Values
	// Bootstrap selects the bootstrap machine's variant: a new single-member etcd.
	Bootstrap bool
}

func (s *staticPods) generate(p graph.Parents, role string, bootstrap bool) error {
	v := &Values{}
	if err := p.Get(v); err != nil {
		return err
	}
	return s.render(path.Join(StaticPodsDir, role), staticPodData{Values: v, Bootstrap: bootstrap}, staticPodTemplates...)
}

func (s *staticPods) loadRole(f graph.FileFetcher, role string) (bool, error) {
	return s.load(f, targetPaths(path.Join(StaticPodsDir, role), staticPodTemplates))
}
