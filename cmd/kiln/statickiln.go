package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
)

// mainPackage is kiln's main package, what `go install` builds.
const mainPackage = "github.com/kiln-project/kiln/cmd/kiln"

// dynamicallyLinked tells whether the ELF executable at path asks for a
// program interpreter (PT_INTERP): a kiln built with cgo, which cannot run
// in the machines' pause image (it has no C library).
func dynamicallyLinked(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}

// staticBuild is how to get a static kiln: a go command run in Dir with
// Args and CGO_ENABLED=0, whose result is Output.
type staticBuild struct {
	Dir    string
	Args   []string
	Output string
}

// planStaticBuild decides how to rebuild the running, dynamically linked
// kiln without cgo: `go build` in the checkout it was built from, while that
// still holds kiln's sources, else `go install mainPackage@version` for a
// module version that can be installed (the module cache already holds it
// when kiln was go-installed): not "(devel)", and not the "+dirty"
// pseudo-version Go stamps on a build of a changed checkout. goTool is the go command on PATH ("" when none); srcDir is
// where this binary's main package was compiled. The error, when no way
// works, gives the command that fixes it.
func planStaticBuild(bi *debug.BuildInfo, goTool, srcDir, outDir string) (staticBuild, error) {
	version := ""
	if bi != nil && bi.Main.Path == "github.com/kiln-project/kiln" && bi.Main.Version != "" && bi.Main.Version != "(devel)" &&
		!strings.HasSuffix(bi.Main.Version, "+dirty") {
		version = bi.Main.Version
	}
	fix := "CGO_ENABLED=0 go install " + mainPackage + "@" + orLatest(version)
	if goTool == "" {
		return staticBuild{}, fmt.Errorf("this kiln is dynamically linked (built with cgo), and the machines run it "+
			"in an image with no C library; no go command is on PATH to rebuild it. Install a static kiln: %s "+
			"(or build it with CGO_ENABLED=0 go build ./cmd/kiln)", fix)
	}
	if srcDir != "" && isKilnMain(srcDir) {
		return staticBuild{Dir: srcDir, Args: []string{"build", "-o", filepath.Join(outDir, "kiln"), "."}, Output: filepath.Join(outDir, "kiln")}, nil
	}
	if version != "" {
		return staticBuild{Dir: outDir, Args: []string{"install", mainPackage + "@" + version}, Output: filepath.Join(outDir, "kiln")}, nil
	}
	return staticBuild{}, fmt.Errorf("this kiln is dynamically linked (built with cgo), and the machines run it "+
		"in an image with no C library; its sources are not where it was built. Rebuild it static: %s "+
		"(or CGO_ENABLED=0 go build ./cmd/kiln in your checkout)", fix)
}

func orLatest(v string) string {
	if v == "" {
		return "latest"
	}
	return v
}

// isKilnMain tells whether dir holds kiln's main package: main.go in a
// module named github.com/kiln-project/kiln two levels up.
func isKilnMain(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		return false
	}
	mod, err := os.ReadFile(filepath.Join(dir, "..", "..", "go.mod"))
	return err == nil && bytes.HasPrefix(mod, []byte("module github.com/kiln-project/kiln\n"))
}

// sourceDir is the folder this binary's main package was compiled in (empty
// when built with -trimpath).
func sourceDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	return filepath.Dir(file)
}

// staticKiln returns kiln, or, when it is dynamically linked, a static copy
// built once into <cache>/bin/kiln-<key>-static; key names the dynamic
// binary. It fails fast with the fix when no static kiln can be built.
func staticKiln(ctx context.Context, log logrus.FieldLogger, kiln, cache, key string) (string, error) {
	dynamic, err := dynamicallyLinked(kiln)
	if err != nil || !dynamic {
		return kiln, err
	}
	out := filepath.Join(cache, "bin", "kiln-"+key+"-static")
	if _, err := os.Stat(filepath.Join(out, "kiln")); err == nil {
		return filepath.Join(out, "kiln"), nil
	}
	bi, _ := debug.ReadBuildInfo()
	goTool, _ := exec.LookPath("go")
	plan, err := planStaticBuild(bi, goTool, sourceDir(), out)
	if err != nil {
		return "", exitcode.With(exitcode.Input, err)
	}
	log.Warnf("This kiln is dynamically linked (cgo); building a static copy for the machines: CGO_ENABLED=0 go %s (in %s)",
		strings.Join(plan.Args, " "), plan.Dir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goTool, plan.Args...)
	cmd.Dir = plan.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+out, "GOFLAGS=-trimpath")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(out)
		return "", exitcode.With(exitcode.Input, fmt.Errorf("building a static kiln failed (%v): %s; install one: CGO_ENABLED=0 go install %s@latest",
			err, bytes.TrimSpace(b), mainPackage))
	}
	if dyn, err := dynamicallyLinked(plan.Output); err != nil || dyn {
		os.RemoveAll(out)
		return "", exitcode.With(exitcode.Input, errors.New("the rebuilt kiln is still dynamically linked; build one with CGO_ENABLED=0"))
	}
	return plan.Output, nil
}
