package terraform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
)

// buildSpec says how to build one engine release from the Go module proxy:
// a throwaway wrapper module requires Package at Version and builds it, which
// also works for modules whose go.mod has replace directives (those must be
// repeated in GoMod, since `go install pkg@version` refuses such modules).
type buildSpec struct {
	Name    string
	Title   string
	Version string
	Package string
	// GoMod is the wrapper module's go.mod without require lines.
	GoMod string
	// LDFlags marks the build as a release (no "-dev" suffix).
	LDFlags string
}

// engineBuilds are tried in order: OpenTofu (MPL-2.0), then Terraform 1.5.7,
// the last MPL-2.0 Terraform release.
var engineBuilds = []buildSpec{
	{
		Name:    OpenTofu,
		Title:   "OpenTofu",
		Version: "1.12.6",
		Package: "github.com/opentofu/opentofu/cmd/tofu",
		GoMod: `module kiln.dev/enginebuild

go 1.26.6

godebug tlsmlkem=0

replace github.com/hashicorp/hcl/v2 v2.20.1 => github.com/opentofu/hcl/v2 v2.20.2-0.20251021132045-587d123c2828
`,
		LDFlags: "-s -w -X github.com/opentofu/opentofu/version.dev=no",
	},
	{
		Name:    Terraform,
		Title:   "Terraform",
		Version: "1.5.7",
		Package: "github.com/hashicorp/terraform",
		GoMod: `module kiln.dev/enginebuild

go 1.20
`,
		LDFlags: "-s -w -X github.com/hashicorp/terraform/version.dev=no",
	},
}

// module returns the module path of the spec's package.
func (s buildSpec) module() string {
	if i := strings.Index(s.Package, "/cmd/"); i >= 0 {
		return s.Package[:i]
	}
	return s.Package
}

// dir returns the spec's directory in the cache: <cache>/engines/<name>-v<version>.
func (s buildSpec) dir(cacheDir string) string {
	return filepath.Join(cacheDir, "engines", s.Name+"-v"+s.Version)
}

// binary returns the path of the built engine in the cache.
func (s buildSpec) binary(cacheDir string) string {
	return filepath.Join(s.dir(cacheDir), s.Name)
}

// buildCommands returns the go commands that build spec in the cache: run in
// order, with the wrapper go.mod written to <dir>/src first. The binary is
// written to out, which the caller renames to s.binary(cacheDir).
func buildCommands(ctx context.Context, s buildSpec, goBin, cacheDir, out string, environ []string) []*exec.Cmd {
	src := filepath.Join(s.dir(cacheDir), "src")
	env := append(filterEnv(environ, "GOFLAGS", "GOWORK", "CGO_ENABLED", "GO111MODULE"),
		"GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0", "GO111MODULE=on")
	get := exec.CommandContext(ctx, goBin, "get", s.Package+"@v"+s.Version)
	build := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-ldflags="+s.LDFlags,
		"-o", out, s.Package)
	for _, c := range []*exec.Cmd{get, build} {
		c.Dir = src
		c.Env = env
	}
	return []*exec.Cmd{get, build}
}

// filterEnv returns environ without the named variables.
func filterEnv(environ []string, drop ...string) []string {
	out := make([]string, 0, len(environ))
next:
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		for _, d := range drop {
			if k == d {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// BuildOptions configures BuildEngine and EnsureEngine.
type BuildOptions struct {
	// CacheDir is kiln's cache directory (see platforms.CacheDir).
	CacheDir string
	// LookPath finds binaries on PATH; exec.LookPath when nil.
	LookPath func(string) (string, error)
	// Log receives the go command's output at Debug level.
	Log logrus.FieldLogger
	// Progress shows the build to the user.
	Progress platforms.Progress
}

func (o *BuildOptions) lookPath(name string) (string, error) {
	if o.LookPath != nil {
		return o.LookPath(name)
	}
	return exec.LookPath(name)
}

// BuildEngine builds an engine from the Go module proxy into the cache, or
// reuses one built before: OpenTofu first, Terraform 1.5.7 when OpenTofu
// cannot be built. It needs the go command on PATH.
func BuildEngine(ctx context.Context, o BuildOptions) (*Engine, error) {
	for _, s := range engineBuilds {
		if e, err := ProbeEngine(ctx, s.Name, s.binary(o.CacheDir)); err == nil {
			o.Log.Debugf("using %s built before", e)
			return e, nil
		}
	}
	goBin, err := o.lookPath("go")
	if err != nil {
		return nil, fmt.Errorf("no OpenTofu (>= 1.6) or Terraform (>= 1.5) on PATH, and no go command to build one: %w", err)
	}
	var errs []error
	for _, s := range engineBuilds {
		e, err := buildOne(ctx, o, s, goBin)
		if err == nil {
			return e, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		o.Log.Warnf("Building %s %s failed: %v", s.Title, s.Version, err)
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// buildOne builds spec s with goBin and probes the result.
func buildOne(ctx context.Context, o BuildOptions, s buildSpec, goBin string) (e *Engine, err error) {
	end := o.Progress.Start(fmt.Sprintf("Building %s %s from the Go module proxy (once, a few minutes)", s.Title, s.Version))
	defer func() { end(err) }()
	start := time.Now()
	src := filepath.Join(s.dir(o.CacheDir), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(s.GoMod), 0o644); err != nil {
		return nil, err
	}
	os.Remove(filepath.Join(src, "go.sum"))
	bin := s.binary(o.CacheDir)
	err = atomicfile.Produce(bin, 0o755, func(out string) error {
		for i, cmd := range buildCommands(ctx, s, goBin, o.CacheDir, out, os.Environ()) {
			if i == 1 {
				o.Progress.Update("compiling " + s.Package)
			} else {
				o.Progress.Update("downloading " + s.module() + " v" + s.Version + " and its dependencies")
			}
			if err := runLogged(cmd, o.Log, "build "+s.Name+": "); err != nil {
				return fmt.Errorf("build %s %s: %w", s.Title, s.Version, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	o.Log.Infof("Built %s %s in %s", s.Title, s.Version, time.Since(start).Round(time.Second))
	return ProbeEngine(ctx, s.Name, bin)
}

// runLogged runs cmd with its output logged line by line at Debug level;
// the error names the last line the command printed.
func runLogged(cmd *exec.Cmd, log logrus.FieldLogger, prefix string) error {
	ll := newLineLogger(log, prefix)
	cmd.Stdout, cmd.Stderr = ll, ll
	log.Debugf("running %s", strings.Join(cmd.Args, " "))
	err := cmd.Run()
	ll.Close()
	if err != nil && ll.Last() != "" {
		return fmt.Errorf("%s: %w (last output: %s)", cmd.Args[0]+" "+cmd.Args[1], err, ll.Last())
	}
	return err
}

// EnsureEngine returns the engine kiln runs: tofu or terraform on PATH when
// its version fits (OpenTofu >= 1.6, Terraform >= 1.5), else one built into
// the cache by BuildEngine.
func EnsureEngine(ctx context.Context, o BuildOptions) (*Engine, error) {
	for _, name := range []string{OpenTofu, Terraform} {
		path, err := o.lookPath(name)
		if err != nil {
			continue
		}
		e, err := ProbeEngine(ctx, name, path)
		if err != nil {
			o.Log.Infof("Not using %s: %v", path, err)
			continue
		}
		o.Log.Debugf("using %s", e)
		return e, nil
	}
	return BuildEngine(ctx, o)
}
