// Package schemagen turns the doc comments of install-config's Go types
// into the table `kiln explain` prints and into docs/install-config.md.
package schemagen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Type is one struct type of the schema.
type Type struct {
	Name   string
	Doc    string
	Fields []Field
}

// Field is one field of a struct type.
type Field struct {
	Name string // JSON name
	Type string // display type: string, integer, []object...
	Ref  string // table name of a nested struct (see Load), "" for scalars
	Doc  string
}

// TypesPackage is the import path of the install-config schema's root
// package, whose types.go declares Config.
const TypesPackage = "github.com/kiln-project/kiln/assets/installconfig/types"

// pkg is one package of the schema.
type pkg struct {
	// prefix is put before the names of the package's types in the table:
	// "" for package types, "Local" for package local.
	prefix string
	files  []*ast.File
	// structs are the names of the package's struct types.
	structs map[string]bool
	// imports maps the name an import is used by to its package, for the
	// packages of the schema that this one imports.
	imports map[string]*pkg
}

// Load reads the schema from dir, the directory of TypesPackage: the
// struct types of dir/types.go and of every package under TypesPackage
// that types.go imports, such as a platform's section (types/local). A
// type of such a package is named in the table with the package's name in
// front, local.Platform as LocalPlatform, and so is the start of its doc
// comment, so that names stay unique and the table reads as if every type
// were declared in types.go.
func Load(dir string) (map[string]Type, error) {
	fset := token.NewFileSet()
	root, err := parser.ParseFile(fset, filepath.Join(dir, "types.go"), nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	schema := []*pkg{{files: []*ast.File{root}, imports: map[string]*pkg{}}}
	for _, imp := range root.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		sub, ok := strings.CutPrefix(path, TypesPackage+"/")
		if !ok {
			continue
		}
		files, err := parseDir(fset, filepath.Join(dir, filepath.FromSlash(sub)))
		if err != nil {
			return nil, err
		}
		name := files[0].Name.Name
		p := &pkg{prefix: strings.ToUpper(name[:1]) + name[1:], files: files}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		schema[0].imports[name] = p
		schema = append(schema, p)
	}
	out := map[string]Type{}
	for _, p := range schema {
		p.structs = map[string]bool{}
		forEachStruct(p, func(ts *ast.TypeSpec, _ *ast.GenDecl) { p.structs[ts.Name.Name] = true })
	}
	for _, p := range schema {
		forEachStruct(p, func(ts *ast.TypeSpec, g *ast.GenDecl) {
			t := describeStruct(p, ts, g)
			out[t.Name] = t
		})
	}
	if _, ok := out["Config"]; !ok {
		return nil, fmt.Errorf("no Config type in %s", filepath.Join(dir, "types.go"))
	}
	return out, nil
}

// parseDir parses the Go files of the package in dir, tests left out.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	return files, nil
}

// forEachStruct calls fn with each struct type declared in p and its
// declaration, in source order.
func forEachStruct(p *pkg, fn func(*ast.TypeSpec, *ast.GenDecl)) {
	for _, f := range p.files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); isStruct(ts) {
					fn(ts, g)
				}
			}
		}
	}
}

// describeStruct is the table entry of the struct type ts of p.
func describeStruct(p *pkg, ts *ast.TypeSpec, g *ast.GenDecl) Type {
	t := Type{Name: p.prefix + ts.Name.Name, Doc: text(g.Doc)}
	if strings.HasPrefix(t.Doc, ts.Name.Name+" ") {
		t.Doc = p.prefix + t.Doc
	}
	for _, fl := range ts.Type.(*ast.StructType).Fields.List {
		if len(fl.Names) != 1 || !fl.Names[0].IsExported() || fl.Tag == nil {
			continue
		}
		tag, _ := strconv.Unquote(fl.Tag.Value)
		name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		display, ref := describe(fl.Type, p)
		doc := text(fl.Doc)
		if goName := fl.Names[0].Name; strings.HasPrefix(doc, goName+" ") {
			doc = name + doc[len(goName):]
		}
		t.Fields = append(t.Fields, Field{Name: name, Type: display, Ref: ref, Doc: doc})
	}
	return t
}

func isStruct(ts *ast.TypeSpec) bool {
	_, ok := ts.Type.(*ast.StructType)
	return ok
}

// text is a comment's text on one line.
func text(cg *ast.CommentGroup) string {
	return strings.Join(strings.Fields(cg.Text()), " ")
}

// describe returns the display type of a Go type expression of p and,
// for a struct of the schema, its name in the table.
func describe(e ast.Expr, p *pkg) (string, string) {
	switch t := e.(type) {
	case *ast.StarExpr:
		return describe(t.X, p)
	case *ast.ArrayType:
		d, ref := describe(t.Elt, p)
		return "[]" + d, ref
	case *ast.SelectorExpr:
		if x, ok := t.X.(*ast.Ident); ok {
			if q := p.imports[x.Name]; q != nil && q.structs[t.Sel.Name] {
				return "object", q.prefix + t.Sel.Name
			}
		}
	case *ast.Ident:
		switch {
		case p.structs[t.Name]:
			return "object", p.prefix + t.Name
		case strings.HasPrefix(t.Name, "int"):
			return "integer", ""
		case strings.HasPrefix(t.Name, "float"):
			return "number", ""
		case t.Name == "bool":
			return "boolean", ""
		}
		return t.Name, ""
	}
	return "object", ""
}

// GoTable renders the table as Go source of package pkg.
func GoTable(types map[string]Type, pkg string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by schemagen from types/types.go; DO NOT EDIT.\n\npackage %s\n\n", pkg)
	b.WriteString("// schemaTypes documents each struct type of install-config.yaml.\nfunc schemaTypes() map[string]typeDoc {\n\treturn map[string]typeDoc{\n")
	for _, name := range sortedNames(types) {
		t := types[name]
		fmt.Fprintf(&b, "\t\t%q: {Doc: %q, Fields: []fieldDoc{\n", name, t.Doc)
		for _, f := range t.Fields {
			fmt.Fprintf(&b, "\t\t\t{Name: %q, Type: %q, Ref: %q, Doc: %q},\n", f.Name, f.Type, f.Ref, f.Doc)
		}
		b.WriteString("\t\t}},\n")
	}
	b.WriteString("\t}\n}\n")
	return format.Source(b.Bytes())
}

// Markdown renders the user reference with example, an install-config the
// tests validate.
func Markdown(types map[string]Type, example []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# install-config.yaml reference\n\n")
	b.WriteString("<!-- Generated by `go generate ./assets/installconfig` from assets/installconfig/types/types.go; do not edit. -->\n\n")
	b.WriteString("`kiln create install-config` validates this file, fills in every default and writes it back;\n")
	b.WriteString("`kiln explain installconfig.<field>` prints the description of one field, `kiln show install-config`\n")
	b.WriteString("the effective configuration of a --dir. Unknown fields are errors, and every problem is reported at once\n")
	b.WriteString("with its field path, e.g. `install-config.yaml: networking.serviceNetwork[0]: Invalid value: \"10.128.0.0/16\": overlaps networking.clusterNetwork[0].cidr`.\n\n")
	b.WriteString("## Example\n\nThe smallest valid file (the tests validate it); everything else has a default:\n\n```yaml\n")
	b.Write(example)
	b.WriteString("```\n\n## Fields\n\n| Field | Type | Description |\n|---|---|---|\n")
	var walk func(prefix, typ string)
	walk = func(prefix, typ string) {
		for _, f := range types[typ].Fields {
			path := prefix + f.Name
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", path, f.Type, mdEscape(f.Doc))
			if f.Ref != "" {
				sep := "."
				if strings.HasPrefix(f.Type, "[]") {
					sep = "[]."
				}
				walk(path+sep, f.Ref)
			}
		}
	}
	walk("", "Config")
	return b.Bytes()
}

func sortedNames(types map[string]Type) []string {
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// mdEscape keeps a description inside its table cell and visible.
func mdEscape(s string) string {
	return strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;").Replace(s)
}
