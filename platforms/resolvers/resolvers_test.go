package resolvers

import (
	"io/fs"
	"slices"
	"testing"
)

// The host's resolvers: resolv.conf's, unless it names only loopback
// addresses and systemd-resolved's file names others.
func TestOf(t *testing.T) {
	files := map[string]string{
		"plain":    "# comment\nsearch example.com\nnameserver 10.255.255.53\nnameserver 2001:db8::1\noptions edns0\n",
		"stub":     "nameserver 127.0.0.53\noptions edns0 trust-ad\n",
		"resolved": "nameserver 198.51.100.53\nnameserver 198.51.100.54\n",
		"dnsmasq":  "nameserver 127.0.0.1\n",
		"garbage":  "nameserver not-an-address\n",
	}
	read := func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	for _, tt := range []struct {
		files []string
		want  []string
	}{
		{[]string{"plain", "resolved"}, []string{"10.255.255.53:53", "[2001:db8::1]:53"}},
		{[]string{"stub", "resolved"}, []string{"198.51.100.53:53", "198.51.100.54:53"}},
		{[]string{"dnsmasq", "missing"}, []string{"127.0.0.1:53"}},
		{[]string{"missing", "resolved"}, []string{"198.51.100.53:53", "198.51.100.54:53"}},
		{[]string{"garbage"}, nil},
	} {
		if got := Of(tt.files, read); !slices.Equal(got, tt.want) {
			t.Errorf("Of(%q) = %q, want %q", tt.files, got, tt.want)
		}
	}
}
