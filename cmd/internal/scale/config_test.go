package scale

import (
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/cmd/internal/install"
)

func testConfig(masters, workers int64) *types.Config {
	return &types.Config{
		Metadata:     types.Metadata{Name: "demo"},
		BaseDomain:   "example.com",
		PullSecret:   `{"auths":{}}`,
		ControlPlane: &types.MachinePool{Name: "master", Replicas: &masters},
		Compute:      []types.MachinePool{{Name: "worker", Replicas: &workers}},
		Networking:   &types.Networking{MachineNetwork: []types.MachineNetworkEntry{{CIDR: "10.66.0.0/24"}}},
		Platform:     types.Platform{Local: &local.Platform{APIVIP: "10.66.0.1"}},
	}
}

// TestCounts checks that replica counts are read from an edited
// install-config, that a redacted pull secret counts as unchanged, and
// that every other change is refused with its field named.
func TestCounts(t *testing.T) {
	cur := testConfig(1, 1)
	want := testConfig(3, 2)
	want.PullSecret = redacted
	m, w, err := Counts(cur, want)
	if err != nil || m != 3 || w != 2 {
		t.Fatalf("Counts = %d, %d, %v; want 3, 2", m, w, err)
	}
	bad := testConfig(3, 2)
	bad.BaseDomain = "other.com"
	bad.Platform.Local.APIVIP = "10.66.0.2"
	_, _, err = Counts(cur, bad)
	if err == nil {
		t.Fatal("a changed baseDomain and apiVIP were accepted")
	}
	for _, f := range []string{"baseDomain: Forbidden", "platform.local.apiVIP: Forbidden"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error lacks %q: %v", f, err)
		}
	}
	if strings.Contains(err.Error(), "replicas") && !strings.Contains(err.Error(), "only controlPlane.replicas") {
		t.Errorf("replicas reported as a change: %v", err)
	}
}

// TestRequestFinishesPending checks that a bare re-run asks for the counts
// an interrupted shrink was going to, not for the machines still recorded.
func TestRequestFinishesPending(t *testing.T) {
	c := &install.Cluster{}
	c.Config, c.InfraID = testConfig(1, 2), infra
	c.Shape = machines.Shape{Masters: ms(0), Workers: ws(0, 1)}
	req, err := request(c, Options{Masters: -1, Workers: -1}, ws(0))
	if err != nil || req.Masters != 1 || req.Workers != 1 {
		t.Errorf("request = %+v, %v; want 1 master, 1 worker", req, err)
	}
	req, err = request(c, Options{Masters: 3, Workers: -1}, nil)
	if err != nil || req.Masters != 3 || req.Workers != 2 {
		t.Errorf("request = %+v, %v; want 3 masters, 2 workers", req, err)
	}
}
