package platforms

import "testing"

// TestNameList checks the list of names a progress line shows.
func TestNameList(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{{nil, "none"}, {[]string{"m-0"}, "m-0"}, {[]string{"m-0", "m-1"}, "m-0, m-1"}} {
		if got := NameList(tc.names); got != tc.want {
			t.Errorf("NameList(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
