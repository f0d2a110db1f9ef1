package nodeimage

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// cLib is a C library that a cgo component links statically.
type cLib struct {
	// PkgConfig is the library's pkg-config name (what cgo's
	// `#cgo pkg-config:` asks for).
	PkgConfig string
	// Debian is the Debian package holding its headers, .pc file and
	// static archive.
	Debian string
}

// cgoTools are the host programs every cgo build runs, with the Debian
// packages that hold them. The Makefile's HOST_PACKAGES lists the packages.
var cgoTools = [...]struct{ Name, Debian string }{
	{"gcc", "gcc"},
	{"pkg-config", "pkg-config"},
}

// hostProbe is how cgoPrecondition looks at the build host: a program on
// PATH, and whether a command succeeds. Tests fake both.
type hostProbe struct {
	lookPath func(file string) (string, error)
	succeeds func(name string, args ...string) bool
}

// realHost probes the host kiln runs on.
func realHost() hostProbe {
	return hostProbe{
		lookPath: exec.LookPath,
		succeeds: func(name string, args ...string) bool { return exec.Command(name, args...).Run() == nil },
	}
}

// ErrMissingCgoDeps means the build host lacks a C compiler, pkg-config or
// a C library that a cgo component (runc) needs; it comes wrapped in a
// *PreconditionError naming the Debian packages to install.
var ErrMissingCgoDeps = errors.New("missing C build tools or libraries")

// cgoPrecondition checks that the host can build c, a cgo component,
// before a long build fails halfway: a C compiler, pkg-config and every C
// library of c. The error names what is missing and the Debian packages
// that hold it.
func cgoPrecondition(c Component, host hostProbe) error {
	var missing, debs []string
	for _, t := range cgoTools {
		if _, err := host.lookPath(t.Name); err != nil {
			missing = append(missing, t.Name)
			debs = append(debs, t.Debian)
		}
	}
	_, noPkgConfig := host.lookPath("pkg-config")
	for _, l := range c.CLibs {
		if noPkgConfig != nil || !host.succeeds("pkg-config", "--exists", l.PkgConfig) {
			missing = append(missing, l.PkgConfig)
			debs = append(debs, l.Debian)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &PreconditionError{fmt.Errorf("%w: building %s %s needs %s; on Debian: apt-get install %s (`make deps` installs them)",
		ErrMissingCgoDeps, c.Name, c.Version, strings.Join(missing, ", "), strings.Join(debs, " "))}
}
