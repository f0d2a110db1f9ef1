package provision

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms"
)

func TestSelectNodes(t *testing.T) {
	machines := []string{"demo-x7k2p-worker-0", "demo-x7k2p-bootstrap", "demo-x7k2p-master-0",
		"demo-x7k2p-master-1", "demo-x7k2p-lbtest"}
	tests := []struct {
		name    string
		want    []string
		out     []string
		err     string
		unknown []string
	}{
		{"every node, not the bootstrap", nil, []string{"demo-x7k2p-master-0", "demo-x7k2p-master-1", "demo-x7k2p-worker-0"}, "", nil},
		{"chosen nodes, sorted, once", []string{"demo-x7k2p-worker-0", "demo-x7k2p-master-1", "demo-x7k2p-worker-0"},
			[]string{"demo-x7k2p-master-1", "demo-x7k2p-worker-0"}, "", nil},
		{"bootstrap is not a node", []string{"demo-x7k2p-bootstrap"}, nil,
			"not a node of cluster demo-x7k2p: demo-x7k2p-bootstrap (nodes: demo-x7k2p-master-0, demo-x7k2p-master-1, demo-x7k2p-worker-0)",
			[]string{"demo-x7k2p-bootstrap"}},
		{"unknown node", []string{"demo-x7k2p-master-0", "other-master-0"}, nil, "not a node of cluster demo-x7k2p: other-master-0 ",
			[]string{"other-master-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := selectNodes("demo-x7k2p", machines, tt.want)
			if tt.err != "" {
				var ue *platforms.UnknownNodesError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.err) || !slices.Equal(ue.Unknown, tt.unknown) {
					t.Fatalf("err = %v, want an UnknownNodesError of %q containing %q", err, tt.unknown, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(out, tt.out) {
				t.Errorf("selectNodes = %q, %v; want %q", out, err, tt.out)
			}
		})
	}
	if _, err := selectNodes("demo-x7k2p", []string{"demo-x7k2p-bootstrap"}, nil); err == nil {
		t.Error("a cluster without nodes: no error")
	}
}
