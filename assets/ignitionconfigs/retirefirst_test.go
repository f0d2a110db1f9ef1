package ignitionconfigs_test

import (
	"slices"
	"strings"
	"testing"
)

// TestBootkubeRetiresFirstOnSlowerHardware checks that bootkube gets
// --retire-first exactly when install-config says the control plane's
// hardware is Slower, and that the flag keeps the unit's command line whole.
func TestBootkubeRetiresFirstOnSlowerHardware(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    bool
	}{
		{"", false},
		{"controlPlaneHardwareSpeed: Standard\n", false},
		{"controlPlaneHardwareSpeed: Slower\n", true},
	} {
		dir := newDir(t)
		editInstallConfig(t, dir, "networking:\n", tc.setting+"networking:\n")
		unit := unitOf(bootstrapIn(t, dir), "bootkube.service")
		exec := directives(unit, "ExecStart")
		if len(exec) != 1 {
			t.Fatalf("%q: ExecStart = %q, want one", tc.setting, exec)
		}
		argv := strings.Fields(exec[0])
		if got := slices.Contains(argv, "--retire-first"); got != tc.want {
			t.Errorf("%q: --retire-first in bootkube's command line = %v, want %v: %q", tc.setting, got, tc.want, argv)
		}
		if last := argv[len(argv)-1]; !strings.HasPrefix(last, "--done-file=") {
			t.Errorf("%q: the command line ends in %q, not --done-file: %q", tc.setting, last, argv)
		}
	}
}
