package installconfig

//go:generate go run ./internal/schemagen/gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// typeDoc documents one struct type of the schema.
type typeDoc struct {
	Doc    string
	Fields []fieldDoc
}

// fieldDoc documents one field: its JSON name, display type, the struct
// type it holds (Ref) and its description.
type fieldDoc struct {
	Name, Type, Ref, Doc string
}

// Explain prints the documentation of path, "installconfig" or
// "installconfig.<field>.<field>...", from the doc comments of the types.
func Explain(path string) (string, error) {
	parts := strings.Split(path, ".")
	if root := strings.ToLower(parts[0]); root != "installconfig" && root != "install-config" {
		return "", &graph.InputError{Err: fmt.Errorf("%s: paths start with installconfig, e.g. installconfig.networking", path)}
	}
	types := schemaTypes()
	typ, doc, kind := "Config", types["Config"].Doc, "object"
	for i, name := range parts[1:] {
		fields := types[typ].Fields
		j := slices.IndexFunc(fields, func(f fieldDoc) bool { return f.Name == name })
		if j < 0 {
			if typ == "" {
				return "", &graph.InputError{Err: fmt.Errorf("%s: %s has no fields", path, strings.Join(parts[:i+1], "."))}
			}
			return "", &graph.InputError{Err: fmt.Errorf("%s: no field %q in %s; fields: %s",
				path, name, strings.Join(parts[:i+1], "."), strings.Join(fieldNames(fields), ", "))}
		}
		typ, doc, kind = fields[j].Ref, fields[j].Doc, fields[j].Type
	}
	var b strings.Builder
	if len(parts) == 1 {
		fmt.Fprintf(&b, "KIND:  InstallConfig (%s)\n\n", installdir.InstallConfig)
	} else {
		fmt.Fprintf(&b, "FIELD: %s <%s>\n\n", strings.Join(parts[1:], "."), kind)
	}
	fmt.Fprintf(&b, "DESCRIPTION:\n%s\n", indent(doc, "  "))
	if typ != "" && len(types[typ].Fields) > 0 {
		b.WriteString("\nFIELDS:\n")
		for _, f := range types[typ].Fields {
			fmt.Fprintf(&b, "  %s <%s>\n%s\n", f.Name, f.Type, indent(f.Doc, "    "))
		}
	}
	return b.String(), nil
}

func fieldNames(fields []fieldDoc) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.Name
	}
	return out
}

// indent wraps s at 80 columns after margin.
func indent(s, margin string) string {
	var lines []string
	line := margin
	for _, w := range strings.Fields(s) {
		if len(line)+1+len(w) > 80 && len(line) > len(margin) {
			lines = append(lines, line)
			line = margin
		}
		if len(line) > len(margin) {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
