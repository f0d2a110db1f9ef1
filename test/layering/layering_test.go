// Package layering holds kiln's layer table, the one place it is written
// (table), and checks it: every import arrow of kiln points down, a package
// importing only packages of its own floor or of a lower one. A package's
// own tests count as the package; external test packages (package x_test)
// import what they like, since nothing imports them. The folders show the
// floors: every floor is a folder (data, graph, ignition and assets,
// platforms, cmd/cluster, cmd/node, cmd, test), and a folder's packages
// share its floor. The contracts (contracts) are a rule inside the assets'
// floor, not a floor of their own. It holds tests only.
package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is kiln's module path.
const module = "github.com/kiln-project/kiln"

// floor is one floor of the layer table.
type floor struct {
	// level is 0 for the ground floor; a package may import packages of
	// its own level or a lower one.
	level int
	name  string
	// pkgs are the floor's packages as paths inside the module: "x" is
	// package x alone, "x/..." is x and every package under it. A package
	// is on the floor of its longest matching pattern.
	pkgs []string
}

// table is kiln's layer table, lowest floor first, one folder a floor:
//
//  0. data, the embedded Butane, templates and Terraform modules;
//  1. graph, the asset engine, with the two pieces of ground it stands
//     on: the atomic file writer and the layout of --dir (installdir);
//  2. ignition and the assets, among them the contracts every floor above
//     reads (contracts);
//  3. platforms: provisioning, and the machinery every platform may use
//     (the node image, the API load balancer, Terraform, routes);
//  4. the cluster's life after the assets: install phases, waits, scale,
//     upgrade, etcd membership, certificates (cmd/cluster);
//  5. the node agents, `kiln node ...` on the machines (cmd/node), which
//     share the cluster floor's etcd membership;
//  6. the commands: cmd/kiln, wiring flags to one call, and its helpers;
//  7. the tests, and the tooling that serves only them (the conformance
//     suite's build).
func table() []floor {
	return []floor{
		{0, "data", []string{"data/..."}},
		{1, "graph", []string{"graph/..."}},
		{2, "ignition and assets", []string{"ignition/...", "assets/..."}},
		{3, "platforms", []string{"platforms/..."}},
		{4, "cluster life", []string{"cmd/cluster/..."}},
		{5, "node agents", []string{"cmd/node/..."}},
		{6, "commands", []string{"cmd/..."}},
		{7, "test", []string{"test/..."}},
	}
}

// contracts are the packages of the assets' floor that every floor above
// reads and that hold no asset logic: the node's file layout, the
// certificate renewal bundle kiln sends a master, and the
// machine-config server's authentication, the install-config schema with
// each platform's section and config logic, the releases, the manifest
// inventory. A contract imports only other contracts and the floors below
// its own, so that reading the schema never links an asset.
func contracts() []string {
	return []string{
		"ignition/nodelayout",
		"ignition/certbundle",
		"ignition/mcsauth",
		"assets/installconfig/types/...",
		"assets/release",
		"assets/manifests/inventory",
		"assets/internal/yamlkeys",
	}
}

// isContract reports whether the module-relative package path rel is one
// of contracts.
func isContract(contracts []string, rel string) bool {
	return slices.ContainsFunc(contracts, func(p string) bool {
		ok, _ := match(p, rel)
		return ok
	})
}

// match reports whether the module-relative package path rel matches
// pattern, and how specific the match is (the pattern's length).
func match(pattern, rel string) (bool, int) {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/"), len(pattern)
	}
	return rel == pattern, len(pattern)
}

// floorOf returns the floor of the module-relative package path rel.
func floorOf(floors []floor, rel string) (floor, bool) {
	var best floor
	bestLen := -1
	for _, f := range floors {
		for _, p := range f.pkgs {
			if ok, n := match(p, rel); ok && n > bestLen {
				best, bestLen = f, n
			}
		}
	}
	return best, bestLen >= 0
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath  string
	Imports     []string
	TestImports []string
	Error       *struct{ Err string }
}

// violations returns every import of pkgs that points up the floors of
// table or out of contracts to a package of the same floor, as "A imports
// B" lines, and every kiln package the table puts on no floor. A package's own tests are part of it (TestImports); external
// test packages (package x_test) are not checked: nothing imports them, so
// they are leaves above every floor.
func violations(floors []floor, contracts []string, pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		from, ok := floorOf(floors, rel)
		if !ok {
			out = append(out, fmt.Sprintf("%s is on no floor: add it to the table of test/layering", rel))
			continue
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports) {
			irel, ok := relative(imp)
			if !ok {
				continue
			}
			to, ok := floorOf(floors, irel)
			switch {
			case !ok:
			case to.level == from.level && isContract(contracts, rel) && !isContract(contracts, irel):
				out = append(out, fmt.Sprintf("%s imports %s: a contract imports only contracts and lower floors, and %s is an asset of floor %d (%s)",
					rel, irel, irel, to.level, to.name))
			case to.level <= from.level:
			default:
				out = append(out, fmt.Sprintf("%s imports %s: floor %d (%s) imports floor %d (%s), an arrow that points up",
					rel, irel, from.level, from.name, to.level, to.name))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// relative returns the path of a kiln package inside the module.
func relative(importPath string) (string, bool) {
	return strings.CutPrefix(importPath, module+"/")
}

// goList runs go list -json with args in the repository's root.
func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Imports,TestImports,Error"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportsPointDown fails on every import of a kiln package, its tests
// included, that points to a higher floor, and on every kiln package the
// table puts on no floor.
func TestImportsPointDown(t *testing.T) {
	for _, v := range violations(table(), contracts(), goList(t, "./...")) {
		t.Error(v)
	}
}

// TestTableNamesWhatExists keeps the table and the contracts accurate:
// every pattern names at least one package.
func TestTableNamesWhatExists(t *testing.T) {
	pkgs := goList(t, "./...")
	exists := func(pattern string) bool {
		return slices.ContainsFunc(pkgs, func(p pkg) bool {
			rel, ok := relative(p.ImportPath)
			m, _ := match(pattern, rel)
			return ok && m
		})
	}
	for _, f := range table() {
		for _, pattern := range f.pkgs {
			if !exists(pattern) {
				t.Errorf("floor %d (%s) lists %s, which names no package", f.level, f.name, pattern)
			}
		}
	}
	for _, pattern := range contracts() {
		if !exists(pattern) {
			t.Errorf("contracts list %s, which names no package", pattern)
		}
	}
}

// TestFoldersShowTheFloors: a floor's patterns are whole folders
// ("x/..."), so that no package's floor differs from its folder's.
func TestFoldersShowTheFloors(t *testing.T) {
	for _, f := range table() {
		for _, pattern := range f.pkgs {
			if !strings.HasSuffix(pattern, "/...") {
				t.Errorf("floor %d (%s) lists the single package %s: a floor is made of folders", f.level, f.name, pattern)
			}
		}
	}
}

// TestViolations checks the checker on a small graph: an arrow that points
// up, one from a contract to an asset of its floor, and a package on no
// floor are reported; arrows down and sideways, between contracts, from
// an asset to a contract, to other modules, and into a more specific
// pattern's floor are not.
func TestViolations(t *testing.T) {
	k := func(rel string) string { return module + "/" + rel }
	pkgs := []pkg{
		{ImportPath: k("assets/installconfig"), Imports: []string{k("assets/installconfig/types"), k("graph"), "fmt", k("assets/tls")}},
		{ImportPath: k("assets/tls"), TestImports: []string{k("platforms")}},
		{ImportPath: k("assets/installconfig/types/configs"), Imports: []string{k("assets/installconfig/types/machines"), k("graph"), k("assets/tls")}},
		{ImportPath: k("cmd/kiln"), Imports: []string{k("cmd/cluster/install"), k("cmd/node/netd")}},
		{ImportPath: k("cmd/cluster/install"), Imports: []string{k("cmd/node/netd")}},
		{ImportPath: k("graph"), Imports: []string{k("graph/atomicfile")}},
		{ImportPath: k("graph/graphtest"), Imports: []string{k("graph"), k("graph/atomicfile/atomicfiletest")}},
		{ImportPath: k("tools/gen")},
		{ImportPath: "example.com/other", Imports: []string{k("cmd/kiln")}},
	}
	want := []string{
		"assets/installconfig/types/configs imports assets/tls: a contract imports only contracts and lower floors, and assets/tls is an asset of floor 2 (ignition and assets)",
		"assets/tls imports platforms: floor 2 (ignition and assets) imports floor 3 (platforms), an arrow that points up",
		"cmd/cluster/install imports cmd/node/netd: floor 4 (cluster life) imports floor 5 (node agents), an arrow that points up",
		"tools/gen is on no floor: add it to the table of test/layering",
	}
	if got := violations(table(), contracts(), pkgs); !slices.Equal(got, want) {
		t.Errorf("violations =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAssetsAndNodeAgentsDoNotLinkProvisioning: the assets and the node
// agents must not link provisioning (Terraform, the machines, the node
// image), even indirectly. The floors keep provisioning out of the assets;
// the node agents are commands, which may import platforms, so they are
// checked by their dependencies.
func TestAssetsAndNodeAgentsDoNotLinkProvisioning(t *testing.T) {
	forbidden := []string{
		"github.com/hashicorp/terraform",
		module + "/platforms/terraform",
		module + "/platforms/provisioners",
		module + "/platforms/local/",
		module + "/platforms/nodeimage",
		module + "/platforms/lb",
	}
	for _, p := range goList(t, "-deps", "./assets/...", "./cmd/node/...") {
		for _, f := range forbidden {
			if strings.HasPrefix(p.ImportPath, f) {
				t.Errorf("assets or node agents depend on %s", p.ImportPath)
			}
		}
	}
}
