package manifests

import (
	"fmt"
	"path"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

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
	return s.render(path.Join(installdir.StaticPods, role), staticPodData{Values: v, Bootstrap: bootstrap}, staticPodTemplates...)
}

// loadRole loads static-pods/<role>/ from disk. Every file of the role is
// required (a control plane without its API server or etcd never comes up),
// so one deleted while others remain is an error naming it.
func (s *staticPods) loadRole(f graph.FileFetcher, role string) (bool, error) {
	paths := targetPaths(path.Join(installdir.StaticPods, role), staticPodTemplates)
	found, err := s.load(f, paths, CheckPod)
	if !found || err != nil {
		return found, err
	}
	for _, p := range paths {
		if _, ok := s.File(path.Base(p)); !ok {
			return false, &graph.InputError{Err: &MissingFileError{Path: p, Dir: path.Dir(p)}}
		}
	}
	return true, nil
}

// MissingFileError is a required file deleted from a folder whose other
// files are still in --dir.
type MissingFileError struct {
	// Path is the missing file; Dir is its folder in --dir.
	Path, Dir string
}

// Error implements error, with advice that works: a folder removed as a
// whole is written again from the state file.
func (e *MissingFileError) Error() string {
	return fmt.Sprintf("%s is missing, and every file of %s/ is required: put it back, "+
		"or remove %s/ as a whole to have kiln write all of it again (your edits of the other files there are lost)",
		e.Path, e.Dir, e.Dir)
}
