package machine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	img := t.TempDir()
	os.MkdirAll(filepath.Join(img, "etc"), 0o755)
	os.WriteFile(filepath.Join(img, "etc/os-release"), []byte("ID=debian\n"), 0o644)
	notOS := t.TempDir()
	valid := func() Spec {
		return Spec{Name: "demo-master-0", Image: img, Bridge: "kiln0", Address: "10.66.0.11/24",
			Hosts: []HostEntry{{IP: "10.66.0.10", Names: []string{"api-int.demo.example"}}},
			Env:   map[string]string{"KILN_ROLE": "master"}, CPUs: 2, MemoryBytes: 1 << 30,
			Binds: []Bind{{Source: "/usr/bin/kiln", Target: "/usr/local/bin/kiln", ReadOnly: true}}}
	}
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   string // substring of the error; "" = valid
	}{
		{"valid", func(*Spec) {}, ""},
		{"upper-case name", func(s *Spec) { s.Name = "Demo" }, `name "Demo"`},
		{"name with slash", func(s *Spec) { s.Name = "a/b" }, `name "a/b"`},
		{"relative image", func(s *Spec) { s.Image = "img" }, "image:"},
		{"image not an OS tree", func(s *Spec) { s.Image = notOS }, "not an OS tree"},
		{"image with comma", func(s *Spec) { s.Image = "/a,b" }, "contains one of"},
		{"no bridge", func(s *Spec) { s.Bridge = "" }, "bridge"},
		{"long bridge", func(s *Spec) { s.Bridge = "a-very-long-bridge" }, "bridge"},
		{"address without prefix", func(s *Spec) { s.Address = "10.66.0.11" }, "address"},
		{"ipv6 address", func(s *Spec) { s.Address = "fd00::11/64" }, "address"},
		{"bad host IP", func(s *Spec) { s.Hosts[0].IP = "api" }, "hosts[0].ip"},
		{"bad host name", func(s *Spec) { s.Hosts[0].Names = []string{"a b"} }, "hosts[0].names"},
		{"bad env key", func(s *Spec) { s.Env["1X"] = "v" }, `env "1X"`},
		{"env newline", func(s *Spec) { s.Env["X"] = "a\nb" }, "newline"},
		{"negative memory", func(s *Spec) { s.MemoryBytes = -1 }, "negative"},
		{"bind with colon", func(s *Spec) { s.Binds[0].Target = "/a:b" }, "binds[0].target"},
		{"service network route", func(s *Spec) { s.Routes = []string{"172.30.0.0/16"} }, ""},
		{"default route", func(s *Spec) { s.Routes = []string{"0.0.0.0/0"} }, "routes[0] \"0.0.0.0/0\": a default route"},
		{"route is an address", func(s *Spec) { s.Routes = []string{"172.30.0.1"} }, "routes[0]"},
		{"ipv6 route", func(s *Spec) { s.Routes = []string{"fd02::/112"} }, "routes[0]"},
		{"gateway", func(s *Spec) { s.Gateway = "10.66.0.1" }, ""},
		{"gateway off the network", func(s *Spec) { s.Gateway = "10.67.0.1" }, `gateway "10.67.0.1"`},
		{"gateway is the machine", func(s *Spec) { s.Gateway = "10.66.0.11" }, `gateway "10.66.0.11"`},
		{"gateway not an address", func(s *Spec) { s.Gateway = "host" }, `gateway "host"`},
		{"route with host bits", func(s *Spec) { s.Routes = []string{"10.0.0.0/8", "172.30.0.1/16"} }, "routes[1] \"172.30.0.1/16\": host bits are set (172.30.0.0/16)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(&s)
			_, err := s.validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestSpecHash(t *testing.T) {
	a := Spec{Name: "m", Env: map[string]string{"A": "1", "B": "2"}}
	b := Spec{Name: "m", Env: map[string]string{"B": "2", "A": "1"}}
	c := Spec{Name: "m", Env: map[string]string{"A": "1", "B": "3"}}
	d := Spec{Name: "m", Env: map[string]string{"A": "1", "B": "2"}, MemoryBytes: 1}
	if a.hash() != b.hash() {
		t.Errorf("hash depends on map order")
	}
	if a.hash() == c.hash() || a.hash() == d.hash() {
		t.Errorf("different specs hash alike")
	}
	e := Spec{Name: "m", Env: map[string]string{"A": "1", "B": "2"}, Routes: []string{"172.30.0.0/16"}}
	if a.hash() == e.hash() {
		t.Errorf("routes do not change the hash")
	}
	g := Spec{Name: "m", Env: map[string]string{"A": "1", "B": "2"}, Gateway: "10.66.0.1"}
	if a.hash() == g.hash() {
		t.Errorf("the gateway does not change the hash")
	}
}

// TestSpecHashWithoutRoutes pins the hash of a spec without routes to the
// value kiln computed before Spec had Routes: a machine an older kiln
// created must not look changed (Create refuses a changed spec).
func TestSpecHashWithoutRoutes(t *testing.T) {
	s := Spec{Name: "m", Address: "10.66.0.11/24", Env: map[string]string{"A": "1"}}
	const before = "df99e1e08404eec861185ab33a38f9d6746e10bdca28394177d4fba835827277"
	if got := s.hash(); got != before {
		t.Errorf("hash = %s, want %s", got, before)
	}
}
