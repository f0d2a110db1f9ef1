package nodeimage

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

func TestProxyEnv(t *testing.T) {
	p := &types.Proxy{HTTPProxy: "http://proxy.example.com:3128", HTTPSProxy: "http://user:secret@proxy.example.com:3128", NoProxy: ".corp,10.0.0.0/8"}
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name   string
		p      *types.Proxy
		getenv func(string) string
		want   []string
	}{
		{"no proxy", nil, none, nil},
		{"a proxy section naming none", &types.Proxy{NoProxy: ".corp"}, none, nil},
		{"install-config's, in both cases", p, none, []string{
			"HTTP_PROXY=http://proxy.example.com:3128", "http_proxy=http://proxy.example.com:3128",
			"HTTPS_PROXY=http://user:secret@proxy.example.com:3128", "https_proxy=http://user:secret@proxy.example.com:3128",
			"NO_PROXY=.corp,10.0.0.0/8", "no_proxy=.corp,10.0.0.0/8"}},
		{"only https", &types.Proxy{HTTPSProxy: "http://p:1"}, none, []string{"HTTPS_PROXY=http://p:1", "https_proxy=http://p:1"}},
		{"the host's own wins whole", p, func(k string) string {
			if k == "https_proxy" {
				return "http://host-proxy:8080"
			}
			return ""
		}, nil},
	} {
		if got := ProxyEnv(tc.p, tc.getenv); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ProxyEnv = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCommandsGetTheProxy checks that the commands a toolkit (and so a
// build) runs see install-config's proxy.
func TestCommandsGetTheProxy(t *testing.T) {
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"} {
		t.Setenv(v, "")
	}
	dir := filepath.Join(t.TempDir(), "cache")
	tk, err := NewToolkit(Options{CacheDir: dir, Go: filepath.Join(dir, "no-go"),
		Proxy: &types.Proxy{HTTPSProxy: "http://proxy.example.com:3128", NoProxy: ".corp"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := tk.Output(context.Background(), Command{Path: "sh", Args: []string{"-c", `echo "$https_proxy $HTTPS_PROXY $no_proxy $HTTP_PROXY."`}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out), "http://proxy.example.com:3128 http://proxy.example.com:3128 .corp ."; got != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}
}
