package terraform

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms/shellquote"
)

// Provider is a Terraform provider shipped in the kiln binary: kiln installs
// it into a filesystem mirror as a small executable that runs Command.
type Provider struct {
	// Source is the provider's source address, e.g. "kiln.dev/kiln/kilnlocal".
	// Its hostname must be kilnHost so the CLI configuration never lets the
	// engine look for it on a network.
	Source string
	// Version is the version the mirror offers ("MAJOR.MINOR.PATCH").
	Version string
	// Command is the argv that serves the provider, e.g.
	// ["/usr/local/bin/kiln", "terraform-provider-kilnlocal"].
	Command []string
	// Env is extra environment for Command (tests use it); nil in production.
	Env map[string]string
}

// kilnHost is the hostname of every provider source kiln ships; the CLI
// configuration excludes it from direct (network) installation.
const kilnHost = "kiln.dev"

// typeName returns the provider's type, the last part of its source.
func (p Provider) typeName() string {
	return p.Source[strings.LastIndex(p.Source, "/")+1:]
}

// mirrorPath returns the provider's executable path inside the unpacked
// filesystem mirror dir: <dir>/<host>/<ns>/<type>/<version>/<os>_<arch>/terraform-provider-<type>.
func (p Provider) mirrorPath(dir string) string {
	return filepath.Join(dir, filepath.FromSlash(p.Source), p.Version,
		runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-"+p.typeName())
}

// cliConfig renders the CLI configuration: providers from kiln.dev come only
// from the mirror in mirrorDir; every other provider is installed directly
// (modules kiln ships need none). Nothing else of the user's configuration
// (plugin cache, credentials, host blocks) applies.
func cliConfig(mirrorDir string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by kiln; kiln never reads the user's CLI configuration.\n")
	fmt.Fprintf(&b, "disable_checkpoint = true\n\n")
	fmt.Fprintf(&b, "provider_installation {\n")
	fmt.Fprintf(&b, "  filesystem_mirror {\n    path    = %q\n    include = [\"%s/*/*\"]\n  }\n", mirrorDir, kilnHost)
	fmt.Fprintf(&b, "  direct {\n    exclude = [\"%s/*/*\"]\n  }\n", kilnHost)
	fmt.Fprintf(&b, "}\n")
	return b.Bytes()
}

// providerScript renders the executable the engine starts for p: a shell
// script that execs p.Command with p.Env and the engine's arguments.
func providerScript(p Provider) []byte {
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n# Written by kiln: the provider is served by the kiln binary.\nexec")
	if len(p.Env) > 0 {
		b.WriteString(" env")
		for _, k := range sortedKeys(p.Env) {
			b.WriteString(" " + shellquote.Quote(k+"="+p.Env[k]))
		}
	}
	for _, a := range p.Command {
		b.WriteString(" " + shellquote.Quote(a))
	}
	b.WriteString(" \"$@\"\n")
	return b.Bytes()
}

// WriteCLIConfig installs providers into the filesystem mirror mirrorDir and
// writes the CLI configuration file path that points the engine at it,
// through w. Both are rewritten every run so they always name the running
// kiln binary.
func WriteCLIConfig(w *atomicfile.Writer, path, mirrorDir string, providers []Provider) error {
	for _, p := range providers {
		if !strings.HasPrefix(p.Source, kilnHost+"/") || strings.Count(p.Source, "/") != 2 {
			return fmt.Errorf("provider source %q: must be %s/<namespace>/<type>", p.Source, kilnHost)
		}
		if _, err := parseSemver(p.Version); err != nil {
			return fmt.Errorf("provider %s: %w", p.Source, err)
		}
		if err := w.Write(p.mirrorPath(mirrorDir), providerScript(p), 0o755); err != nil {
			return err
		}
	}
	return w.Write(path, cliConfig(mirrorDir), 0o644)
}
