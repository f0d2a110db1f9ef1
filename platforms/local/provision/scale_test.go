package provision

import (
	"reflect"
	"testing"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// TestCountMoves checks that the machines of a cluster stage applied by
// count are moved to their names, and nothing else is.
func TestCountMoves(t *testing.T) {
	in := []terraform.Instance{
		{Resource: masterResource, Key: float64(0), Name: "demo-master-0"},
		{Resource: masterResource, Key: "demo-master-1", Name: "demo-master-1"},
		{Resource: workerResource, Key: float64(1), Name: "demo-worker-1"},
		{Resource: "kilnlocal_load_balancer.api", Key: nil, Name: "demo"},
		{Resource: "kilnlocal_machine.bootstrap", Key: float64(0), Name: "demo-bootstrap"},
	}
	want := [][2]string{
		{`kilnlocal_machine.master[0]`, `kilnlocal_machine.master["demo-master-0"]`},
		{`kilnlocal_machine.worker[1]`, `kilnlocal_machine.worker["demo-worker-1"]`},
	}
	if got := countMoves(in); !reflect.DeepEqual(got, want) {
		t.Errorf("countMoves = %q, want %q", got, want)
	}
}

// TestNormalizeVars checks that variables of a cluster created before
// machine names get the names create gave its machines, and that names
// already there are kept.
func TestNormalizeVars(t *testing.T) {
	old := tfdata.LocalVars{InfraID: "demo-x7k2p", MasterAddresses: []string{"a", "b", "c"}, WorkerAddresses: []string{"d"}}
	normalizeVars(&old)
	if !reflect.DeepEqual(old.MasterNames, []string{"demo-x7k2p-master-0", "demo-x7k2p-master-1", "demo-x7k2p-master-2"}) ||
		!reflect.DeepEqual(old.WorkerNames, []string{"demo-x7k2p-worker-0"}) {
		t.Errorf("names = %q, %q", old.MasterNames, old.WorkerNames)
	}
	kept := tfdata.LocalVars{InfraID: "demo-x7k2p", MasterNames: []string{"demo-x7k2p-master-2"}, MasterAddresses: []string{"c"}}
	normalizeVars(&kept)
	if !reflect.DeepEqual(kept.MasterNames, []string{"demo-x7k2p-master-2"}) || kept.WorkerNames != nil {
		t.Errorf("names = %q, %q", kept.MasterNames, kept.WorkerNames)
	}
}
