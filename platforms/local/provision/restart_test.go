package provision

import (
	"reflect"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/platforms"
)

func TestStopOrder(t *testing.T) {
	names := []string{"c-x-bootstrap", "c-x-master-0", "c-x-master-1", "c-x-master-10", "c-x-master-2",
		"c-x-worker-0", "c-x-worker-1"}
	want := [][]string{
		{"c-x-worker-0", "c-x-worker-1"},
		{"c-x-bootstrap"},
		{"c-x-master-10"}, {"c-x-master-2"}, {"c-x-master-1"}, {"c-x-master-0"},
	}
	if got := stopOrder(names); !reflect.DeepEqual(got, want) {
		t.Errorf("stopOrder =\n%q\nwant\n%q", got, want)
	}
	if got := stopOrder(nil); len(got) != 0 {
		t.Errorf("stopOrder(nil) = %q", got)
	}
}

func TestNodeMachines(t *testing.T) {
	three, one := int64(3), int64(1)
	c := &platforms.Cluster{InfraID: "demo-x7k2p", Config: &types.Config{
		ControlPlane: &types.MachinePool{Replicas: &three},
		Compute:      []types.MachinePool{{Replicas: &one}},
	}}
	want := []string{"demo-x7k2p-master-0", "demo-x7k2p-master-1", "demo-x7k2p-master-2", "demo-x7k2p-worker-0"}
	if got := nodeMachines(c); !reflect.DeepEqual(got, want) {
		t.Errorf("nodeMachines = %q, want %q", got, want)
	}
}
