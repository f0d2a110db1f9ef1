package manifests

import (
	"errors"
	"slices"
	"testing"

	"github.com/kiln-project/kiln/assets/internal/yamlkeys"
	"github.com/kiln-project/kiln/graph"
)

// A key set twice in a manifest or a static pod is refused, naming the
// file, the field and both lines: YAML would keep the last one silently.
// Kinds client-go does not know (custom resources) are checked too.
func TestCheckRefusesDuplicateKeys(t *testing.T) {
	type dup struct {
		field        string
		first, again int
	}
	tests := []struct {
		name  string
		check func(*graph.File) error
		data  string
		want  []dup
	}{
		{name: "ConfigMap", check: CheckObjects,
			data: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: \"1\"\n  b: \"2\"\n  a: \"3\"\n",
			want: []dup{{"data.a", 6, 8}}},
		{name: "custom resource, second document", check: CheckObjects,
			data: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: x\n  name: y\nspec:\n  a: 1\n  a: 2\n",
			want: []dup{{"metadata.name", 9, 10}, {"spec.a", 12, 13}}},
		{name: "JSON manifest", check: CheckObjects,
			data: "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\",\n \"metadata\": {\"name\": \"a\"},\n \"kind\": \"Namespace\"}\n",
			want: []dup{{"kind", 1, 3}}},
		{name: "static pod", check: CheckPod,
			data: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n    image: j\n",
			want: []dup{{"spec.containers[0].image", 8, 9}}},
		{name: "no duplicate", check: CheckObjects, data: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(&graph.File{Path: "manifests/50-x.yaml", Data: []byte(tc.data)})
			var got []dup
			for _, e := range unjoin(err) {
				var fe *FileError
				var d yamlkeys.Duplicate
				if errors.As(e, &fe) && fe.Path == "manifests/50-x.yaml" && errors.As(e, &d) {
					got = append(got, dup{d.Field.String(), d.First, d.Again})
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("duplicates %v, want %v (err %v)", got, tc.want, err)
			}
			if tc.want != nil && !graph.IsInputError(err) {
				t.Errorf("%v: not an input error", err)
			}
			if tc.want == nil && err != nil {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// unjoin returns the errors joined in err (err itself when it joins none).
func unjoin(err error) []error {
	for err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
		err = errors.Unwrap(err)
	}
	return nil
}
