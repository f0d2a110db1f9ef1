package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// buildHello builds a tiny Go program with or without cgo.
func buildHello(t *testing.T, cgo bool) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	src := "package main\n\nimport \"net\"\n\nfunc main() { _, _ = net.LookupHost(\"localhost\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	env := "CGO_ENABLED=0"
	if cgo {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Skip("no gcc: cannot build with cgo")
		}
		env = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), env, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// D11: a cgo build (net with cgo links libc) is told apart from a static one.
func TestDynamicallyLinked(t *testing.T) {
	for _, cgo := range []bool{false, true} {
		dyn, err := dynamicallyLinked(buildHello(t, cgo))
		if err != nil || dyn != cgo {
			t.Errorf("cgo=%v: dynamicallyLinked = %v, %v", cgo, dyn, err)
		}
	}
	if _, err := dynamicallyLinked("statickiln.go"); err == nil {
		t.Error("a non-ELF file is not an error")
	}
}

// D11: how a dynamically linked kiln gets its static copy, or the fix.
func TestPlanStaticBuild(t *testing.T) {
	released := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kiln-project/kiln", Version: "v0.3.1"}}
	devel := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kiln-project/kiln", Version: "(devel)"}}
	// What Go stamps on a build of a changed checkout (buildvcs).
	dirty := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kiln-project/kiln", Version: "v0.0.0-20261125021326-2ba014cbf9f5+dirty"}}
	src, err := filepath.Abs(".") // this checkout's cmd/kiln
	if err != nil {
		t.Fatal(err)
	}
	out := "/cache/bin/kiln-x-static"
	for _, tc := range []struct {
		name        string
		bi          *debug.BuildInfo
		goTool, src string
		wantArgs    string
		wantDir     string
		wantErr     string
	}{
		{name: "go-installed release", bi: released, goTool: "/usr/bin/go", wantArgs: "install " + mainPackage + "@v0.3.1", wantDir: out},
		{name: "built in a checkout", bi: devel, goTool: "/usr/bin/go", src: src, wantArgs: "build -o " + out + "/kiln .", wantDir: src},
		{name: "checkout gone", bi: devel, goTool: "/usr/bin/go", src: "/nonexistent/cmd/kiln",
			wantErr: "CGO_ENABLED=0 go install " + mainPackage + "@latest"},
		{name: "no go command", bi: released, wantErr: "CGO_ENABLED=0 go install " + mainPackage + "@v0.3.1"},
		{name: "stamped build of a changed checkout", bi: dirty, goTool: "/usr/bin/go", src: src, wantArgs: "build -o " + out + "/kiln .", wantDir: src},
		{name: "stamped build, checkout gone", bi: dirty, goTool: "/usr/bin/go", src: "/nonexistent/cmd/kiln",
			wantErr: "CGO_ENABLED=0 go install " + mainPackage + "@latest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planStaticBuild(tc.bi, tc.goTool, tc.src, out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(plan.Args, " ") != tc.wantArgs || plan.Dir != tc.wantDir || plan.Output != out+"/kiln" {
				t.Errorf("plan = %+v, %v; want go %s in %s", plan, err, tc.wantArgs, tc.wantDir)
			}
		})
	}
}
