package platforms

import (
	"fmt"
	"strings"
)

// UnknownNodesError is a request naming machines that are not nodes of the
// cluster, such as `kiln load image-archive --nodes` with a name that is no
// master or worker of it. The user fixes the names; Nodes lists the ones
// there are.
type UnknownNodesError struct {
	// InfraID is the cluster's.
	InfraID string
	// Unknown are the names asked for that are not nodes.
	Unknown []string
	// Nodes are the cluster's nodes, sorted.
	Nodes []string
}

// Error names the unknown names and the cluster's nodes.
func (e *UnknownNodesError) Error() string {
	return fmt.Sprintf("not a node of cluster %s: %s (nodes: %s)",
		e.InfraID, strings.Join(e.Unknown, ", "), strings.Join(e.Nodes, ", "))
}
