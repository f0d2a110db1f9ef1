package nodeimage

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// fakeHost is a build host with the given programs on PATH, on which
// `pkg-config --exists` succeeds for the given libraries.
func fakeHost(programs, libs []string) hostProbe {
	return hostProbe{
		lookPath: func(file string) (string, error) {
			if slices.Contains(programs, file) {
				return "/usr/bin/" + file, nil
			}
			return "", exec.ErrNotFound
		},
		succeeds: func(name string, args ...string) bool {
			return name == "pkg-config" && len(args) == 2 && args[0] == "--exists" && slices.Contains(libs, args[1])
		},
	}
}

func TestCgoPrecondition(t *testing.T) {
	var runc Component
	for _, c := range Components(release.Default()) {
		if c.Name == "runc" {
			runc = c
		}
	}
	if !runc.Cgo || len(runc.CLibs) == 0 {
		t.Fatalf("runc is not a cgo component linking C libraries: %+v", runc)
	}
	tests := []struct {
		name     string
		host     hostProbe
		wantDebs []string // nil: no error
	}{
		{"everything there", fakeHost([]string{"gcc", "pkg-config"}, []string{"libseccomp"}), nil},
		{"no libseccomp-dev", fakeHost([]string{"gcc", "pkg-config"}, nil), []string{"libseccomp-dev"}},
		{"no compiler", fakeHost([]string{"pkg-config"}, []string{"libseccomp"}), []string{"gcc"}},
		// Without pkg-config the library cannot be found either.
		{"no pkg-config", fakeHost([]string{"gcc"}, []string{"libseccomp"}), []string{"pkg-config", "libseccomp-dev"}},
		{"bare host", fakeHost(nil, nil), []string{"gcc", "pkg-config", "libseccomp-dev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cgoPrecondition(runc, tt.host)
			if tt.wantDebs == nil {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			var pe *PreconditionError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMissingCgoDeps) {
				t.Fatalf("error %v (%T), want a *PreconditionError wrapping ErrMissingCgoDeps", err, err)
			}
			if want := "apt-get install " + strings.Join(tt.wantDebs, " ") + " "; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}
