package yamlkeys

import (
	"bytes"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Duplicate is a key set twice in one mapping.
type Duplicate struct {
	// Field is the path of the key, e.g. metadata.name; the mapping's own
	// path is Field's parent.
	Field *field.Path
	// First and Again are the lines (from 1, counted in the whole stream)
	// where the key is set first and where it is set again.
	First, Again int
}

// Error names the field and both lines.
func (d Duplicate) Error() string {
	return d.Field.String() + ": " + d.Detail()
}

// Detail says what is wrong without the field, for a field.Error.
func (d Duplicate) Detail() string {
	return fmt.Sprintf("set twice, at line %d and again at line %d (YAML would silently keep the last): remove one", d.First, d.Again)
}

// FieldError returns d as a field error (type Duplicate) for validation
// lists.
func (d Duplicate) FieldError() *field.Error {
	return &field.Error{Type: field.ErrorTypeDuplicate, Field: d.Field.String(), BadValue: field.OmitValueType{}, Detail: d.Detail()}
}

// Find returns every key set twice in a mapping of the YAML stream data
// (every document of it), in the order of their second lines. Keys compare by their
// text, as they do once converted to JSON: `1:` and `"1":` are the same
// key. Data that go-yaml cannot parse gives the duplicates of the documents
// before the one it fails on: reporting the syntax error is the caller's
// parser's business.
func Find(data []byte) []Duplicate {
	var out []Duplicate
	mappings(data, func(p *field.Path, m *yaml.Node) {
		first := map[string]int{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if line, ok := first[k.Value]; ok {
				out = append(out, Duplicate{Field: child(p, k.Value), First: line, Again: k.Line})
			} else {
				first[k.Value] = k.Line
			}
		}
	})
	slices.SortStableFunc(out, func(a, b Duplicate) int { return a.Again - b.Again })
	return out
}

// Value is the scalar value of a key.
type Value struct {
	// Key is the key, e.g. infraID.
	Key string
	// Field is the key's path, e.g. data.infraID.
	Field *field.Path
	// Value is the value as written, without quotes.
	Value string
	// Line is the line of the key, from 1, in the whole stream.
	Line int
}

// Values returns the scalar value of every key named one of keys, at any
// depth of every document of the YAML (or JSON) stream data, in the order
// they appear. Data that go-yaml cannot parse gives the values before the
// point it fails at.
func Values(data []byte, keys ...string) []Value {
	return Scalars(data, func(key, _ string) bool { return slices.Contains(keys, key) })
}

// Scalars is Values for every key whose scalar value match accepts.
func Scalars(data []byte, match func(key, value string) bool) []Value {
	var out []Value
	mappings(data, func(p *field.Path, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			if k.Kind == yaml.ScalarNode && v.Kind == yaml.ScalarNode && match(k.Value, v.Value) {
				out = append(out, Value{Key: k.Value, Field: child(p, k.Value), Value: v.Value, Line: k.Line})
			}
		}
	})
	return out
}

// mappings calls fn with every mapping of every document of the stream
// data, and its path, parents before children.
func mappings(data []byte, fn func(p *field.Path, m *yaml.Node)) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return // io.EOF, or a syntax error the caller's parser reports
		}
		walk(&doc, nil, fn)
	}
}

// walk calls fn with every mapping in n and below; p is n's path.
func walk(n *yaml.Node, p *field.Path, fn func(p *field.Path, m *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walk(c, p, fn)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			walk(c, index(p, i), fn)
		}
	case yaml.MappingNode:
		fn(p, n)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode {
				walk(v, child(p, k.Value), fn)
			} else {
				walk(v, p, fn)
			}
		}
	}
}

func child(p *field.Path, key string) *field.Path {
	if p == nil {
		return field.NewPath(key)
	}
	return p.Child(key)
}

func index(p *field.Path, i int) *field.Path {
	if p == nil {
		return field.NewPath("").Index(i)
	}
	return p.Index(i)
}
