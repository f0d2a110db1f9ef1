// Package machineset is the machines a cluster runs after day 2: the
// records kiln scale cluster keeps in --dir (the shape, installdir.Shape,
// and an ssh cluster's hosts, installdir.Hosts) and the effective
// install-config they give. The install-config in the state file is never
// changed, since every certificate and config depends on it.
package machineset

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// ShapeRecord is the content of installdir.Shape: the machines of the cluster and
// the journal of a change under way.
type ShapeRecord struct {
	machines.Shape
	// Removing names the machines a scale is taking out of the cluster:
	// still in Shape (their machine may still exist), their etcd member,
	// load balancer backend or Node may be gone already. A re-run finishes
	// their removal first.
	Removing []string `json:"removing,omitempty"`
	// Joining holds the bootstrap token (<id>.<secret>) of each machine a
	// scale is adding, until its Node registered: a re-run makes the same
	// token valid again for the machine whose config carries it. A secret:
	// the file is 0600.
	Joining map[string]string `json:"joining,omitempty"`
	// Releases is the Kubernetes release of each machine that boots
	// another than the install-config's (platforms.Cluster.Releases): one
	// a scale added after an upgrade.
	Releases map[string]string `json:"releases,omitempty"`
}

// LoadShape reads dir's shape record; found is false when there is none.
func LoadShape(dir string) (rec ShapeRecord, found bool, err error) {
	found, err = graph.LoadRecord(dir, installdir.Shape, &rec)
	return rec, found, err
}

// SaveShape writes dir's shape record atomically, following no symbolic
// link in dir.
func SaveShape(dir string, rec ShapeRecord) error {
	return graph.SaveRecord(dir, installdir.Shape, rec)
}
