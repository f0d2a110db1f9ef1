package yamlkeys_test

import (
	"reflect"
	"testing"

	"github.com/kiln-project/kiln/assets/internal/yamlkeys"
)

// dup is a Duplicate as data: its field as a string and both lines.
type dup struct {
	field        string
	first, again int
}

func TestFind(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []dup
	}{
		{name: "none", data: "a: 1\nb:\n  a: 2\n"},
		{name: "top level", data: "a: 1\nb: 2\na: 3\n", want: []dup{{"a", 1, 3}}},
		{name: "nested", data: "metadata:\n  name: x\n  labels: {}\n  name: y\n", want: []dup{{"metadata.name", 2, 4}}},
		{name: "in a list", data: "compute:\n- name: w\n  replicas: 1\n  replicas: 2\n", want: []dup{{"compute[0].replicas", 3, 4}}},
		{name: "quoted and plain are one key", data: "data:\n  \"1\": a\n  1: b\n", want: []dup{{"data.1", 2, 3}}},
		{name: "a key set three times", data: "a: 1\na: 2\na: 3\n", want: []dup{{"a", 1, 2}, {"a", 1, 3}}},
		{name: "JSON", data: "{\"kind\": \"Pod\",\n \"kind\": \"Service\"}\n", want: []dup{{"kind", 1, 2}}},
		{name: "lines count in the whole stream", data: "a: 1\n---\nb: 1\nc: 2\nb: 3\n", want: []dup{{"b", 3, 5}}},
		{name: "a merge key is no duplicate", data: "base: &b {a: 1}\nx:\n  <<: *b\n  a: 2\n"},
		{name: "syntax error after a duplicate", data: "a: 1\na: 2\n---\n: [\n", want: []dup{{"a", 1, 2}}},
		{name: "not YAML", data: "\t: [\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []dup
			for _, d := range yamlkeys.Find([]byte(tc.data)) {
				got = append(got, dup{d.Field.String(), d.First, d.Again})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Find = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFieldError(t *testing.T) {
	d := yamlkeys.Find([]byte("metadata:\n  name: x\n  name: y\n"))[0]
	want := "metadata.name: Duplicate value: set twice, at line 2 and again at line 3 (YAML would silently keep the last): remove one"
	if got := d.FieldError().Error(); got != want {
		t.Errorf("FieldError() = %q, want %q", got, want)
	}
}

func TestValues(t *testing.T) {
	type val struct {
		field, value string
		line         int
	}
	tests := []struct {
		name string
		data string
		want []val
	}{
		{name: "ConfigMap", data: "kind: ConfigMap\ndata:\n  clusterName: dev\n  infraID: dev-abcde\n  other: x\n",
			want: []val{{"data.clusterName", "dev", 3}, {"data.infraID", "dev-abcde", 4}}},
		{name: "JSON", data: "{\n  \"clusterName\": \"dev\",\n  \"infraID\": \"dev-abcde\"\n}\n",
			want: []val{{"clusterName", "dev", 2}, {"infraID", "dev-abcde", 3}}},
		{name: "in a list, second document", data: "a: 1\n---\nitems:\n- infraID: x\n", want: []val{{"items[0].infraID", "x", 4}}},
		{name: "not a scalar", data: "infraID: {a: b}\n"},
		{name: "none", data: "a: b\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []val
			for _, v := range yamlkeys.Values([]byte(tc.data), "clusterName", "infraID") {
				got = append(got, val{v.Field.String(), v.Value, v.Line})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Values = %v, want %v", got, tc.want)
			}
		})
	}
}
