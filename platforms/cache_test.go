package platforms

import "testing"

func TestCacheDir(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"KILN_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c"},
		{map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/kiln"},
		{map[string]string{"HOME": "/h"}, "/h/.cache/kiln"},
		{map[string]string{}, ""},
	}
	for _, tt := range tests {
		got, err := CacheDir(func(k string) string { return tt.env[k] })
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("CacheDir(%v) = %q, %v; want %q", tt.env, got, err, tt.want)
		}
	}
}
