// Package docs checks that kiln's documentation names only things that
// exist. It holds tests only.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocsNameWhatExists fails when a doc names a repository file or a Go
// identifier that does not exist. It reads docs/*.md and README.md and every
// comment of every Go file, and checks:
//
//   - repository paths: a word starting with a top-level folder of the
//     repository (assets/, cmd/, data/, docs/, graph/, ignition/,
//     platforms/, test/), e.g. platforms/local/cluster.go, must name a file
//     or folder; {a,b} and * are expanded, and words with a placeholder
//     (<name>, ...) are skipped. In Markdown only code spans are read;
//   - "folder.Ident" (e.g. assets/ignition.NodeValues): the folder must be a
//     package of the repository that declares Ident;
//   - "pkg.Ident" and "pkg.Ident.Member" (e.g. exitcode.With): when pkg is
//     the name of a kiln package and of no other package kiln imports,
//     Ident must be declared in a kiln package of that name, and Member,
//     when Ident is a type, must be one of its methods or fields;
//   - "Type.Member" (e.g. Driver.Outputs): when Type is a type of the
//     commented package (Go) or of any kiln package (Markdown), Member must
//     be one of its methods or fields (through embedded types of the same
//     package; a type that embeds another package's type is not checked);
//   - in Go comments, CamelCase identifiers listed in parentheses, kiln's
//     way of pointing at the code, e.g. "(FindEngine, BuildEngine)", and
//     Go doc links [Ident] / [pkg.Ident]: each must be declared somewhere in
//     the repository (top-level, method or field);
//   - in Markdown, relative links must name an existing file, and their
//     #anchor a heading of that file.
//
// Names of other projects' packages and types are not checked.
func TestDocsNameWhatExists(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	idx, err := loadIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, file := range idx.goFiles {
		if file.pkg.dir == "test/docs" {
			continue // this test's own comments hold examples of wrong names
		}
		problems = append(problems, idx.checkGoComments(file)...)
	}
	mds, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	mds = append(mds, filepath.Join(root, "README.md"))
	for _, md := range mds {
		problems = append(problems, idx.checkMarkdown(md)...)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// topDirs are the repository's top-level folders a path in a doc starts with.
var topDirs = []string{"assets", "cmd", "data", "docs", "graph", "ignition", "platforms", "test"}

// pkg is what one Go package of the repository declares.
type pkg struct {
	dir   string          // repository-relative folder
	name  string          // package name (without _test)
	decls map[string]bool // top-level names
	types map[string]*typ // declared types
}

// typ is a declared type's methods and fields.
type typ struct {
	members map[string]bool
	// embedsLocal are the embedded types of the same package; embedsOther is
	// set when it embeds a type of another package (members then unknown).
	embedsLocal []string
	embedsOther bool
	isType      bool
}

// goFile is one parsed file and its package.
type goFile struct {
	rel  string
	file *ast.File
	pkg  *pkg
}

// index is everything the checks resolve names against.
type index struct {
	root     string
	fset     *token.FileSet
	pkgs     map[string]*pkg   // by folder
	byName   map[string][]*pkg // by package name
	external map[string]bool   // names of non-kiln packages kiln imports
	assetIDs map[string]bool   // what the assets' ID methods return, e.g. ignition/bootstrap
	anywhere map[string]bool   // every name declared anywhere: top-level, methods, fields
	goFiles  []goFile
	module   string
}

func loadIndex(root string) (*index, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	idx := &index{root: root, fset: token.NewFileSet(), pkgs: map[string]*pkg{}, byName: map[string][]*pkg{},
		external: map[string]bool{}, anywhere: map[string]bool{}, assetIDs: map[string]bool{}}
	idx.module = strings.Fields(strings.SplitN(string(mod), "\n", 2)[0])[1]
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(idx.fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		dir := path.Dir(rel)
		pk := idx.pkgs[dir]
		if pk == nil {
			pk = &pkg{dir: dir, name: strings.TrimSuffix(f.Name.Name, "_test"), decls: map[string]bool{}, types: map[string]*typ{}}
			idx.pkgs[dir] = pk
			idx.byName[pk.name] = append(idx.byName[pk.name], pk)
		}
		idx.addFile(pk, f)
		idx.goFiles = append(idx.goFiles, goFile{rel: rel, file: f, pkg: pk})
		return nil
	})
	return idx, err
}

// addFile records f's declarations and imports.
func (idx *index) addFile(pk *pkg, f *ast.File) {
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if strings.HasPrefix(p, idx.module) {
			continue
		}
		name := path.Base(p)
		if regexp.MustCompile(`^v[0-9]+$`).MatchString(name) {
			name = path.Base(path.Dir(p))
		}
		idx.external[name] = true
		if imp.Name != nil {
			idx.external[imp.Name.Name] = true
		}
	}
	typeOf := func(name string) *typ {
		ty := pk.types[name]
		if ty == nil {
			ty = &typ{members: map[string]bool{}}
			pk.types[name] = ty
		}
		return ty
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			idx.anywhere[d.Name.Name] = true
			if d.Recv == nil {
				pk.decls[d.Name.Name] = true
				continue
			}
			if recv := receiverType(d.Recv.List[0].Type); recv != "" {
				typeOf(recv).members[d.Name.Name] = true
			}
			if d.Name.Name == "ID" && d.Body != nil && len(d.Body.List) == 1 {
				if r, ok := d.Body.List[0].(*ast.ReturnStmt); ok && len(r.Results) == 1 {
					if lit, ok := r.Results[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						id, _ := strconv.Unquote(lit.Value)
						idx.assetIDs[id] = true
					}
				}
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						pk.decls[n.Name] = true
						idx.anywhere[n.Name] = true
					}
				case *ast.TypeSpec:
					pk.decls[s.Name.Name] = true
					idx.anywhere[s.Name.Name] = true
					ty := typeOf(s.Name.Name)
					ty.isType = true
					idx.addMembers(ty, s.Type)
				}
			}
		}
	}
}

// addMembers records the fields and interface methods of a type expression.
func (idx *index) addMembers(ty *typ, expr ast.Expr) {
	var fields *ast.FieldList
	switch e := expr.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 { // embedded
			switch e := unstar(f.Type).(type) {
			case *ast.Ident:
				ty.embedsLocal = append(ty.embedsLocal, e.Name)
				ty.members[e.Name] = true
			case *ast.SelectorExpr:
				ty.embedsOther = true
				ty.members[e.Sel.Name] = true
			default:
				ty.embedsOther = true
			}
			continue
		}
		for _, n := range f.Names {
			ty.members[n.Name] = true
			idx.anywhere[n.Name] = true
		}
	}
}

func unstar(e ast.Expr) ast.Expr {
	if s, ok := e.(*ast.StarExpr); ok {
		return s.X
	}
	return e
}

// receiverType is the type name of a method receiver.
func receiverType(e ast.Expr) string {
	switch e := unstar(e).(type) {
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	}
	return ""
}

// hasMember reports whether type name of pk has member m; unknown is true
// when that cannot be told (another package's type is embedded).
func (pk *pkg) hasMember(name, m string, seen map[string]bool) (has, unknown bool) {
	ty := pk.types[name]
	if ty == nil || seen[name] {
		return false, false
	}
	seen[name] = true
	if ty.members[m] {
		return true, false
	}
	unknown = ty.embedsOther
	for _, e := range ty.embedsLocal {
		h, u := pk.hasMember(e, m, seen)
		if h {
			return true, false
		}
		unknown = unknown || u
	}
	return false, unknown
}

var (
	// pathRE is a repository path candidate after a word boundary.
	pathRE = regexp.MustCompile(`(?:^|[\s("'\x60\[])((?:` + strings.Join(topDirs, "|") + `)/[A-Za-z0-9_.,/{}*<>…-]*)`)
	// qualifiedRE is pkg.Ident or pkg.Ident.Member or Type.Member.
	qualifiedRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([A-Za-z][A-Za-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?\b`)
	// parenListRE is a parenthesized list of identifiers: (A, B, C).
	parenListRE = regexp.MustCompile(`\(([A-Z][A-Za-z0-9_]*(?:, [A-Z][A-Za-z0-9_]*)*)\)`)
	// camelRE is an identifier with a lower-case letter before an upper-case one.
	camelRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*[a-z][A-Za-z0-9_]*[A-Z][A-Za-z0-9_]*$`)
	// docLinkRE is a Go doc link [Ident] or [pkg.Ident].
	docLinkRE = regexp.MustCompile(`\[((?:[a-z][a-z0-9]*\.)?[A-Z][A-Za-z0-9_]*)\]`)
)

// checkPaths checks every repository path in text.
func (idx *index) checkPaths(where, text string) []string {
	var out []string
	for _, m := range pathRE.FindAllStringSubmatch(text, -1) {
		p := strings.TrimRight(m[1], ".,:;")
		if strings.ContainsAny(p, "<>…") || strings.Contains(p, "...") || idx.assetIDs[p] {
			continue // a placeholder, or an asset ID such as ignition/bootstrap
		}
		if i := strings.LastIndex(p, "/"); i >= 0 {
			if q := qualifiedRE.FindStringSubmatch(" " + p[i+1:]); q != nil && strings.HasPrefix(p[i+1:], q[1]+".") {
				// folder.Ident: a package and one of its names.
				dir := p[:i+1] + q[1]
				pk := idx.pkgs[dir]
				switch {
				case pk == nil:
					out = append(out, fmt.Sprintf("%s: names %s, but %s is not a package", where, p, dir))
				case !pk.decls[q[2]]:
					out = append(out, fmt.Sprintf("%s: names %s, but package %s declares no %s", where, p, dir, q[2]))
				}
				continue
			}
		}
		if !idx.exists(p) {
			out = append(out, fmt.Sprintf("%s: names %s, which does not exist", where, p))
		}
	}
	return out
}

// exists reports whether a repository path (with {a,b} and * allowed)
// names at least one file or folder, every brace alternative included.
func (idx *index) exists(p string) bool {
	for _, alt := range expandBraces(p) {
		matches, err := filepath.Glob(filepath.Join(idx.root, filepath.FromSlash(strings.TrimSuffix(alt, "/"))))
		if err != nil || len(matches) == 0 {
			return false
		}
	}
	return true
}

// expandBraces expands the first {a,b,...} of p, recursively.
func expandBraces(p string) []string {
	i := strings.Index(p, "{")
	j := strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, expandBraces(p[:i]+alt+p[j+1:])...)
	}
	return out
}

// checkQualified checks pkg.Ident[.Member] and Type.Member in text; local
// is the commented package (nil in Markdown).
func (idx *index) checkQualified(where, text string, local *pkg) []string {
	var out []string
	for _, m := range qualifiedRE.FindAllStringSubmatch(text, -1) {
		first, ident, member := m[1], m[2], m[3]
		if first[0] >= 'a' && first[0] <= 'z' {
			pkgs := idx.byName[first]
			if len(pkgs) == 0 || idx.external[first] {
				continue
			}
			var declaring []*pkg
			for _, pk := range pkgs {
				if pk.decls[ident] {
					declaring = append(declaring, pk)
				}
			}
			if len(declaring) == 0 {
				out = append(out, fmt.Sprintf("%s: names %s.%s, but no package %s declares %s", where, first, ident, first, ident))
				continue
			}
			if member != "" && !idx.anyHasMember(declaring, ident, member) {
				out = append(out, fmt.Sprintf("%s: names %s.%s.%s, but %s has no method or field %s", where, first, ident, member, ident, member))
			}
			continue
		}
		// Type.Member
		var candidates []*pkg
		if local != nil {
			if ty := local.types[first]; ty != nil && ty.isType {
				candidates = []*pkg{local}
			}
		} else {
			for _, pk := range idx.pkgs {
				if ty := pk.types[first]; ty != nil && ty.isType {
					candidates = append(candidates, pk)
				}
			}
		}
		if len(candidates) > 0 && !idx.anyHasMember(candidates, first, ident) {
			out = append(out, fmt.Sprintf("%s: names %s.%s, but %s has no method or field %s", where, first, ident, first, ident))
		}
	}
	return out
}

// anyHasMember reports whether type name in one of pkgs has member m (or
// cannot be told).
func (idx *index) anyHasMember(pkgs []*pkg, name, m string) bool {
	for _, pk := range pkgs {
		if ty := pk.types[name]; ty == nil || !ty.isType {
			return true // a func, var or const: its members are not checked
		}
		has, unknown := pk.hasMember(name, m, map[string]bool{})
		if has || unknown {
			return true
		}
	}
	return false
}

// checkGoComments checks every comment of one Go file.
func (idx *index) checkGoComments(f goFile) []string {
	var out []string
	for _, cg := range f.file.Comments {
		text := cg.Text()
		if strings.HasPrefix(text, "go:") || strings.Contains(text, "Code generated") {
			continue
		}
		where := fmt.Sprintf("%s:%d", f.rel, idx.fset.Position(cg.Pos()).Line)
		out = append(out, idx.checkPaths(where, text)...)
		out = append(out, idx.checkQualified(where, text, f.pkg)...)
		for _, m := range parenListRE.FindAllStringSubmatch(text, -1) {
			for _, id := range strings.Split(m[1], ", ") {
				if camelRE.MatchString(id) && !idx.anywhere[id] {
					out = append(out, fmt.Sprintf("%s: names %s, which is declared nowhere in the repository", where, id))
				}
			}
		}
		for _, m := range docLinkRE.FindAllStringSubmatch(text, -1) {
			id := m[1]
			if i := strings.Index(id, "."); i >= 0 {
				continue // pkg.Ident is checked above
			}
			if !idx.anywhere[id] {
				out = append(out, fmt.Sprintf("%s: links [%s], which is declared nowhere in the repository", where, id))
			}
		}
	}
	return out
}

var (
	fenceRE    = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpanRE = regexp.MustCompile("`([^`\n]+)`")
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE  = regexp.MustCompile(`(?m)^#+ (.+)$`)
)

// checkMarkdown checks one Markdown file's code spans and relative links.
func (idx *index) checkMarkdown(file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	rel, _ := filepath.Rel(idx.root, file)
	text := fenceRE.ReplaceAllString(string(data), "")
	var out []string
	for _, m := range codeSpanRE.FindAllStringSubmatch(text, -1) {
		out = append(out, idx.checkPaths(rel, m[1])...)
		out = append(out, idx.checkQualified(rel, m[1], nil)...)
	}
	for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		name, anchor, _ := strings.Cut(target, "#")
		dest := file
		if name != "" {
			dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(name))
			if _, err := os.Stat(dest); err != nil {
				out = append(out, fmt.Sprintf("%s: links %s, which does not exist", rel, target))
				continue
			}
		}
		if anchor != "" && strings.HasSuffix(dest, ".md") && !hasAnchor(dest, anchor) {
			out = append(out, fmt.Sprintf("%s: links %s, but no heading has that anchor", rel, target))
		}
	}
	return out
}

// hasAnchor reports whether a heading of the Markdown file has GitHub's
// anchor anchor.
func hasAnchor(file, anchor string) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	text := fenceRE.ReplaceAllString(string(data), "")
	for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
		if slug(m[1]) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's heading anchor: lower case, spaces to hyphens, every
// other character but letters, digits, marks, "-" and "_" dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
