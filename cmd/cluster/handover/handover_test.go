package handover

import "testing"

func TestIsComplete(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want bool
	}{
		{"what bootkube writes", CompleteData(), true},
		{"the literal record", map[string]string{"status": "complete"}, true},
		{"no data", nil, false},
		{"another status", map[string]string{"status": "running"}, false},
		{"another key", map[string]string{"state": "complete"}, false},
	} {
		if got := IsComplete(tc.data); got != tc.want {
			t.Errorf("%s: IsComplete(%v) = %v, want %v", tc.name, tc.data, got, tc.want)
		}
	}
}
