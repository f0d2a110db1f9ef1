package installconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/internal/yamlkeys"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// ValidationError is every problem found in one install-config file, as
// data: tests and callers read Errs; Error prints one problem per line.
type ValidationError struct {
	// File is the file the problems are in.
	File string
	// Errs are the problems, each with its field path.
	Errs field.ErrorList
}

// Error prints "install-config.yaml: <field>: <problem>" lines.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errs))
	for i, fe := range e.Errs {
		lines[i] = e.File + ": " + fe.Error()
	}
	return strings.Join(lines, "\n")
}

// invalid returns errs as an input error, or nil when there are none.
func invalid(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &graph.InputError{Err: &ValidationError{File: installdir.InstallConfig, Errs: errs}}
}

// Parse decodes install-config YAML strictly: an unknown field, a value
// of the wrong type or a key set twice (with both lines) is a field error;
// all of them are reported at once, as a *ValidationError. With such errors Parse still returns what it could
// decode, so validation can report the remaining problems too; with
// malformed YAML it returns no config.
func Parse(data []byte) (*types.Config, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, &graph.InputError{Err: fmt.Errorf("%s: %w", installdir.InstallConfig, err)}
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, &graph.InputError{Err: fmt.Errorf("%s: %w", installdir.InstallConfig, err)}
	}
	if tree == nil {
		return nil, &graph.InputError{Err: fmt.Errorf("%s: the file is empty", installdir.InstallConfig)}
	}
	var shape field.ErrorList
	for _, d := range yamlkeys.Find(data) {
		shape = append(shape, d.FieldError())
	}
	shape = append(shape, checkShape(tree, reflect.TypeFor[types.Config](), nil)...)
	c := &types.Config{}
	if err := json.Unmarshal(j, c); err != nil && len(shape) == 0 {
		return nil, &graph.InputError{Err: fmt.Errorf("%s: %w", installdir.InstallConfig, err)}
	}
	return c, invalid(shape)
}

// checkShape compares a decoded JSON tree with the Go type it must fill:
// unknown fields and values of the wrong JSON type are errors.
func checkShape(v any, t reflect.Type, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be an object")}
		}
		fields := jsonFields(t)
		var errs field.ErrorList
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ft, ok := fields[k]
			if !ok {
				known := slices.Sorted(maps.Keys(fields))
				errs = append(errs, field.Forbidden(p.Child(k), "unknown field; known fields: "+strings.Join(known, ", ")))
				continue
			}
			errs = append(errs, checkShape(m[k], ft, p.Child(k))...)
		}
		return errs
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be a list")}
		}
		var errs field.ErrorList
		for i, e := range l {
			errs = append(errs, checkShape(e, t.Elem(), p.Index(i))...)
		}
		return errs
	case reflect.String:
		if _, ok := v.(string); !ok {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be a string")}
		}
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be an integer")}
		}
		if _, err := n.Int64(); err != nil || reflect.New(t).Elem().OverflowInt(mustInt(n)) {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be an integer in range")}
		}
	case reflect.Float64, reflect.Float32:
		if n, ok := v.(json.Number); !ok {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be a number")}
		} else if _, err := n.Float64(); err != nil {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be a number in range")}
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return field.ErrorList{field.TypeInvalid(p, scalar(v), "must be true or false")}
		}
	}
	return nil
}

// jsonFields maps the JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// scalar is the value to show in an error: scalars as they are, objects
// and lists not at all.
func scalar(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return field.OmitValueType{}
	}
	return v
}

func mustInt(n json.Number) int64 {
	i, _ := n.Int64()
	return i
}
