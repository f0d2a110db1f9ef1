package nodeimage

import (
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	datamanifests "github.com/kiln-project/kiln/data/manifests"
)

// corednsPluginPrefix is the import path prefix of CoreDNS's plugins.
const corednsPluginPrefix = "github.com/coredns/coredns/plugin/"

// pluginPackages are the plugin packages whose directive has another name.
var pluginPackages = map[string]string{"prometheus": "metrics"}

// operatorPlugins are the plugins the CoreDNS wrapper imports beyond the
// Corefile's, for an operator to add to the coredns ConfigMap: log, to see
// every query.
var operatorPlugins = []string{"log"}

// TestCoreDNSPluginsMatchCorefile checks that the CoreDNS wrapper imports
// exactly the plugins of kiln's Corefile and operatorPlugins: a missing one
// is an "unknown directive" error when CoreDNS starts on the nodes, an
// extra one is build time for nothing.
func TestCoreDNSPluginsMatchCorefile(t *testing.T) {
	var want []string
	for _, d := range append(corefileDirectives(t), operatorPlugins...) {
		if p, ok := pluginPackages[d]; ok {
			d = p
		}
		want = append(want, d)
	}
	sort.Strings(want)
	files := componentFiles(t, "coredns")
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", files["main.go"], parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	hasCoremain := false
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		switch {
		case p == "github.com/coredns/coredns/coremain":
			hasCoremain = true
		case strings.HasPrefix(p, corednsPluginPrefix):
			got = append(got, strings.TrimPrefix(p, corednsPluginPrefix))
		default:
			t.Errorf("main.go imports %s, neither coremain nor a plugin", p)
		}
	}
	sort.Strings(got)
	if !hasCoremain {
		t.Error("main.go does not import coremain")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plugins imported %q, the Corefile uses %q", got, want)
	}
}

// templateComment is a text/template comment, over several lines.
var templateComment = regexp.MustCompile(`(?s)\{\{-?\s*/\*.*?\*/\s*-?\}\}`)

// corefileDirectives returns the sorted plugin names of the Corefile in
// data/manifests/cluster/11-coredns.yaml: the first word of each line at
// depth one of its server blocks.
func corefileDirectives(t *testing.T) []string {
	t.Helper()
	data, err := fs.ReadFile(datamanifests.FS, "cluster/11-coredns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, corefile, ok := strings.Cut(string(data), "Corefile: |\n")
	if !ok {
		t.Fatal("11-coredns.yaml has no Corefile")
	}
	corefile = templateComment.ReplaceAllString(corefile, "")
	seen := map[string]bool{}
	depth := 0
	for _, line := range strings.Split(corefile, "\n") {
		line = strings.TrimSpace(line)
		if line == "---" {
			break
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "{{") {
			continue // blank, a comment, or a template action
		}
		if depth == 1 && line != "}" {
			seen[strings.Fields(line)[0]] = true
		}
		if depth == 0 {
			// A server block's keys: the template's branches open
			// one each, and only one of them is rendered.
			depth = 1
			continue
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	if len(out) < 3 {
		t.Fatalf("found only %q in the Corefile", out)
	}
	return out
}
