package installconfig

import (
	"os"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/internal/schemagen"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/graph"
)

// TestGeneratedSchemaIsUpToDate fails when types.go or a platform's
// section changed without `go generate ./assets/installconfig`.
func TestGeneratedSchemaIsUpToDate(t *testing.T) {
	example, err := os.ReadFile("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	types, err := schemagen.Load("types")
	if err != nil {
		t.Fatal(err)
	}
	code, err := schemagen.GoTable(types, "installconfig")
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]byte{"schema_gen.go": code, "../../docs/install-config.md": schemagen.Markdown(types, example)} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run go generate ./assets/installconfig", file)
		}
	}
}

// TestSchemaCoversEveryField walks the Go types and the table together.
func TestSchemaCoversEveryField(t *testing.T) {
	types := schemaTypes()
	for name, td := range types {
		if td.Doc == "" {
			t.Errorf("type %s has no doc comment", name)
		}
		for _, f := range td.Fields {
			if f.Doc == "" {
				t.Errorf("%s.%s has no doc comment", name, f.Name)
			}
			if f.Ref != "" {
				if _, ok := types[f.Ref]; !ok {
					t.Errorf("%s.%s refers to unknown type %s", name, f.Name, f.Ref)
				}
			}
		}
	}
}

// TestExplainNetworkTypes keeps the field's documentation in step with the
// values validation accepts.
func TestExplainNetworkTypes(t *testing.T) {
	got, err := Explain("installconfig.networking.networkType")
	if err != nil {
		t.Fatal(err)
	}
	for _, nt := range types.NetworkTypes() {
		if !strings.Contains(got, nt) {
			t.Errorf("explain networking.networkType does not name %s:\n%s", nt, got)
		}
	}
}

func TestExplain(t *testing.T) {
	tests := []struct {
		path string
		want []string
	}{
		{"installconfig", []string{"KIND:  InstallConfig (install-config.yaml)", "apiVersion <string>", "networking <object>"}},
		{"installconfig.networking.clusterNetwork", []string{"FIELD: networking.clusterNetwork <[]object>", "hostPrefix <integer>", "10.128.0.0/14"}},
		{"installconfig.platform.local.apiVIP", []string{"FIELD: platform.local.apiVIP <string>", "machineNetwork[0]"}},
		{"install-config.controlPlane.replicas", []string{"1, 3 or 5"}},
	}
	for _, tt := range tests {
		got, err := Explain(tt.path)
		if err != nil {
			t.Errorf("Explain(%s): %v", tt.path, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("Explain(%s) lacks %q:\n%s", tt.path, w, got)
			}
		}
	}
	for _, bad := range []string{"networking", "installconfig.networkin", "installconfig.baseDomain.x"} {
		if _, err := Explain(bad); !graph.IsInputError(err) {
			t.Errorf("Explain(%s) = %v, want an input error", bad, err)
		}
	}
}
