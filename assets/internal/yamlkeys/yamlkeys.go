package yamlkeys

import (
	"bytes"
	"errors"
	"fmt"
	"io"

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
// (every document of it), in the order they appear. Keys compare by their
// text, as they do once converted to JSON: `1:` and `"1":` are the same
// key. Data that go-yaml cannot parse gives the duplicates of the documents
// before the one it fails on: reporting the syntax error is the caller's
// parser's business.
func Find(data []byte) []Duplicate {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []Duplicate
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) || err != nil {
			return out
		}
		out = walk(&doc, nil, out)
	}
}

// walk appends the duplicates in n and below; p is n's path.
func walk(n *yaml.Node, p *field.Path, out []Duplicate) []Duplicate {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			out = walk(c, p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			out = walk(c, index(p, i), out)
		}
	case yaml.MappingNode:
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				out = walk(v, p, out)
				continue
			}
			if line, ok := first[k.Value]; ok {
				out = append(out, Duplicate{Field: child(p, k.Value), First: line, Again: k.Line})
			} else {
				first[k.Value] = k.Line
			}
			out = walk(v, child(p, k.Value), out)
		}
	}
	return out
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
