package provision

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/release"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
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

// TestImagesOf: a machine added with another release than the cluster's
// boots that release's node image, and keeps it on every later apply;
// a machine that exists keeps the image it was created from, whatever
// the record says; a machine gone takes its entry with it.
func TestImagesOf(t *testing.T) {
	older, newer := "v1.35.4", "v1.36.3"
	c := &platforms.Cluster{
		InfraID:  "demo",
		Shape:    machines.Shape{Masters: []string{"demo-master-0"}, Workers: []string{"demo-worker-0", "demo-worker-1", "demo-worker-2"}},
		Releases: map[string]string{"demo-worker-0": newer, "demo-worker-1": newer, "demo-worker-2": older},
	}
	c.Resolved.Release = release.Release{Kubernetes: older}
	var built []string
	image := func(v string) (string, error) {
		built = append(built, v)
		return "/cache/images/" + v, nil
	}
	prev := &tfdata.LocalVars{
		MasterNames: []string{"demo-master-0"}, WorkerNames: []string{"demo-worker-0", "demo-worker-9"},
		MachineImages: map[string]string{"demo-worker-9": "/cache/images/gone"},
	}
	got, err := imagesOf(c, prev, image)
	if err != nil {
		t.Fatal(err)
	}
	// worker-0 exists from the cluster's image; worker-2 boots the
	// install-config's release.
	want := map[string]string{"demo-worker-1": "/cache/images/" + newer}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(built, []string{newer}) {
		t.Errorf("images %v (built %v), want %v", got, built, want)
	}
	prev.WorkerNames, prev.MachineImages = []string{"demo-worker-0", "demo-worker-1"}, map[string]string{"demo-worker-1": "/old/cache/" + newer}
	if got, err := imagesOf(c, prev, image); err != nil || !reflect.DeepEqual(got, map[string]string{"demo-worker-1": "/old/cache/" + newer}) {
		t.Errorf("a second apply: %v, %v", got, err)
	}
	if _, err := imagesOf(c, nil, func(string) (string, error) { return "", errors.New("not in the cache") }); err == nil ||
		!strings.Contains(err.Error(), "the node image of "+newer+", which demo-worker-0 boots: not in the cache") {
		t.Errorf("a release without its node image: %v", err)
	}
}
