package installconfig

import (
	"errors"
	"flag"
	"os"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/graph"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestParseReportsUnknownFieldsAndTypesWithPaths(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []fieldErr
	}{
		{"unknown top-level field", "apiVersion: kiln.dev/v1\nbaseDomin: example.com\n",
			[]fieldErr{{field.ErrorTypeForbidden, "baseDomin"}}},
		{"unknown nested fields", "networking:\n  clusterNetwork:\n  - cidr: 10.128.0.0/14\n    hostprefix: 23\nplatform:\n  local:\n    vip: 1.2.3.4\n",
			[]fieldErr{{field.ErrorTypeForbidden, "networking.clusterNetwork[0].hostprefix"}, {field.ErrorTypeForbidden, "platform.local.vip"}}},
		{"wrong types", "metadata:\n  name: 12\ncontrolPlane:\n  replicas: three\ncompute: {}\nplatform:\n  local:\n    defaultMachinePlatform:\n      cpus: [1]\n",
			[]fieldErr{{field.ErrorTypeTypeInvalid, "compute"}, {field.ErrorTypeTypeInvalid, "controlPlane.replicas"},
				{field.ErrorTypeTypeInvalid, "metadata.name"}, {field.ErrorTypeTypeInvalid, "platform.local.defaultMachinePlatform.cpus"}}},
		{"integer out of range", "networking:\n  clusterNetwork:\n  - hostPrefix: 99999999999\n",
			[]fieldErr{{field.ErrorTypeTypeInvalid, "networking.clusterNetwork[0].hostPrefix"}}},
		{"fraction for an integer", "controlPlane:\n  replicas: 1.5\n",
			[]fieldErr{{field.ErrorTypeTypeInvalid, "controlPlane.replicas"}}},
		{"add-on switches", "platform:\n  local:\n    addons:\n      storage: \"no\"\n      metric: false\n",
			[]fieldErr{{field.ErrorTypeForbidden, "platform.local.addons.metric"}, {field.ErrorTypeTypeInvalid, "platform.local.addons.storage"}}},
		{"keys set twice", "metadata:\n  name: a\n  name: b\nbaseDomain: example.com\nbaseDomain: example.org\ncompute:\n- name: worker\n  replicas: 1\n  replicas: 0\n",
			[]fieldErr{{field.ErrorTypeDuplicate, "metadata.name"}, {field.ErrorTypeDuplicate, "baseDomain"}, {field.ErrorTypeDuplicate, "compute[0].replicas"}}},
		{"key set twice beside an unknown field", "pullSecret: a\npullsecret: b\npullSecret: c\n",
			[]fieldErr{{field.ErrorTypeDuplicate, "pullSecret"}, {field.ErrorTypeForbidden, "pullsecret"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
			if got := asData(ve.Errs); !slices.Equal(got, tt.want) {
				t.Errorf("errors = %v\nwant %v", got, tt.want)
			}
			if !graph.IsInputError(err) {
				t.Errorf("%v: not an input error", err)
			}
		})
	}
}

// A key set twice is named with both of its lines, in the file's message.
func TestParseNamesBothLinesOfADuplicateKey(t *testing.T) {
	_, err := Parse([]byte("apiVersion: kiln.dev/v1\nmetadata:\n  name: dev\n  name: prod\n"))
	want := "install-config.yaml: metadata.name: Duplicate value: set twice, at line 3 and again at line 4 " +
		"(YAML would silently keep the last): remove one"
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v\nwant %s", err, want)
	}
}

func TestParseRejectsMalformedYAML(t *testing.T) {
	for _, in := range []string{"", "# only a comment\n", "a: [\n", "- a list\n", "just a string\n"} {
		_, err := Parse([]byte(in))
		if err == nil || !graph.IsInputError(err) {
			t.Errorf("Parse(%q) = %v, want an input error", in, err)
		}
	}
}

// TestDefaultsGolden pins every default: go test -run Golden -update.
func TestDefaultsGolden(t *testing.T) {
	c := defaulted(t)
	if errs := Validate(c, testPlatforms()); len(errs) > 0 {
		t.Fatalf("defaults do not validate: %v", errs)
	}
	got, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/defaults.golden.yaml"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("defaults changed; run with -update if intended:\n%s", got)
	}
	// Defaulting is idempotent: the written file loads to the same config.
	c2, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	SetDefaults(c2, testPlatforms())
	if again, _ := yaml.Marshal(c2); string(again) != string(got) {
		t.Errorf("defaulting the defaulted file changed it:\n%s", again)
	}
}

func FuzzParseInstallConfig(f *testing.F) {
	for _, p := range []string{"testdata/minimal.yaml", "testdata/defaults.golden.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("networking:\n  clusterNetwork:\n  - cidr: 10.0.0.0/8\n    hostPrefix: 40\n"))
	f.Add([]byte("controlPlane: {replicas: -3}\ncompute: [{}, {name: x}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if !graph.IsInputError(err) {
				t.Fatalf("parse error is not an input error: %v", err)
			}
			return
		}
		SetDefaults(c, testPlatforms())
		_ = Validate(c, testPlatforms())
		r, _ := c.Resolve()
		_, _ = r.FirstServiceIP(), r.DNSServiceIP()
	})
}
