package release

import "testing"

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"v1.36.3": {Major: 1, Minor: 36, Patch: 3}, "1.35.4": {Major: 1, Minor: 35, Patch: 4}, "3.6.16": {Major: 3, Minor: 6, Patch: 16}, "v1.36.3-rc.0": {Major: 1, Minor: 36, Patch: 3}, "v1.36.3+kiln": {Major: 1, Minor: 36, Patch: 3},
	} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "v1.36", "latest", "v1.x.3", "1.2.3.4", "v1.-1.0"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q): want an error", in)
		}
	}
	if got := (Version{}).String(); got != "unknown" {
		t.Errorf("zero Version prints %q", got)
	}
}
