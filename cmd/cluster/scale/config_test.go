package scale

import (
	"errors"
	"slices"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/local"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/cmd/cluster/install"
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
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("Counts = %v, want the refused fields", err)
	}
	var got []string
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) || fe.Type != field.ErrorTypeForbidden {
			t.Errorf("error %v is not a Forbidden field error", e)
			continue
		}
		got = append(got, fe.Field)
	}
	if want := []string{"baseDomain", "platform.local.apiVIP"}; !slices.Equal(got, want) {
		t.Errorf("refused fields %q, want %q (the replicas may change)", got, want)
	}
}

// TestChangedFields checks the paths of what differs between two
// install-configs, as YAML sees them.
func TestChangedFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *types.Config)
		want []string
	}{
		{name: "nothing", edit: func(*types.Config) {}},
		{name: "an empty list is no list", edit: func(c *types.Config) { c.Networking.ClusterNetwork = []types.ClusterNetworkEntry{} }},
		{name: "nested fields by their YAML names", edit: func(c *types.Config) {
			c.Networking.MachineNetwork[0].CIDR = "10.67.0.0/24"
			c.Metadata.Name = "other"
		}, want: []string{"metadata.name", "networking.machineNetwork[0].cidr"}},
		{name: "a pointer set", edit: func(c *types.Config) { c.Proxy = &types.Proxy{HTTPProxy: "http://proxy:3128"} }, want: []string{"proxy"}},
		{name: "a pointer cleared", edit: func(c *types.Config) { c.Platform.Local = nil }, want: []string{"platform.local"}},
		{name: "a list item added", edit: func(c *types.Config) {
			c.Compute = append(c.Compute, types.MachinePool{Name: "extra"})
		}, want: []string{"compute[1]"}},
		{name: "a replica count", edit: func(c *types.Config) { *c.ControlPlane.Replicas = 5 }, want: []string{"controlPlane.replicas"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testConfig(3, 1), testConfig(3, 1)
			tc.edit(b)
			var got []string
			for _, p := range changedFields(a, b) {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changed %q, want %q", got, tc.want)
			}
		})
	}
}

// TestChangedFieldsSkipsWhatYAMLSkips checks that fields encoding/json
// leaves out are not compared.
func TestChangedFieldsSkipsWhatYAMLSkips(t *testing.T) {
	type config struct {
		Name     string `json:"name"`
		Untagged string
		Derived  string `json:"-"`
		cache    string
	}
	a := &config{Name: "a", Untagged: "a", Derived: "a", cache: "a"}
	b := &config{Name: "b", Untagged: "b", Derived: "b", cache: "b"}
	var got []string
	for _, p := range changedFields(a, b) {
		got = append(got, p.String())
	}
	if want := []string{"Untagged", "name"}; !slices.Equal(got, want) {
		t.Errorf("changed %q, want %q", got, want)
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
