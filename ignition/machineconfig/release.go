package machineconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
)

// ReleaseOrder is the order in which an agent brings the components of one
// node to their desired release: etcd, then the API server, controller
// manager and scheduler, then the kubelet (the version-skew order on one
// node; kiln upgrade cluster orders the nodes).
var ReleaseOrder = []string{string(release.Etcd), string(release.KubeAPIServer), string(release.KubeControllerManager), string(release.KubeScheduler), Kubelet}

// Kubelet is the kubelet's name in a NodeRelease; the others are their
// container images' component names (release.Component).
const Kubelet = "kubelet"

// NodeRelease is a Node's DesiredReleaseAnnotation: the Kubernetes
// release version each component should run.
type NodeRelease map[string]string

// ParseNodeRelease reads a DesiredReleaseAnnotation; "" is an empty one.
// It refuses a component the agent does not manage and a version kiln does
// not pin, naming each.
func ParseNodeRelease(s string) (NodeRelease, error) {
	out := NodeRelease{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", DesiredReleaseAnnotation, err)
	}
	var bad []string
	for c, v := range out {
		if !slices.Contains(ReleaseOrder, c) {
			bad = append(bad, fmt.Sprintf("%s is no component a node's agent changes", c))
		} else if _, err := release.Lookup(v); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", c, err))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return nil, fmt.Errorf("annotation %s: %s", DesiredReleaseAnnotation, strings.Join(bad, "; "))
	}
	return out, nil
}

// String is the annotation's value: JSON with its keys sorted.
func (r NodeRelease) String() string {
	b, _ := json.Marshal(map[string]string(r))
	return string(b)
}

// With is a copy of r with c at version.
func (r NodeRelease) With(c, version string) NodeRelease {
	out := NodeRelease{c: version}
	for k, v := range r {
		if k != c {
			out[k] = v
		}
	}
	return out
}
