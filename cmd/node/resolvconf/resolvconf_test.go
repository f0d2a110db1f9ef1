package resolvconf

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	const etc, resolved = "/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"
	stub := "# systemd-resolved's stub\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n"
	upstreams := "nameserver 192.168.1.1\nnameserver fd00::1\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"the stub only, resolved's upstreams beside it", map[string]string{etc: stub, resolved: upstreams}, resolved},
		{"a real resolver", map[string]string{etc: "nameserver 10.0.0.2\n", resolved: upstreams}, etc},
		{"a real resolver beside the stub", map[string]string{etc: "nameserver 127.0.0.53\nnameserver 10.0.0.2\n", resolved: upstreams}, etc},
		{"the stub only, no upstreams file", map[string]string{etc: stub}, etc},
		{"the stub only, resolved knows no upstream", map[string]string{etc: stub, resolved: "# no servers\n"}, etc},
		{"no resolv.conf at all", map[string]string{}, etc},
		{"an empty resolv.conf, resolved's upstreams", map[string]string{etc: "", resolved: upstreams}, resolved},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if s, ok := c.files[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			if got := Choose([]string{etc, resolved}, read); got != c.want {
				t.Errorf("Choose = %s, want %s", got, c.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kubelet.conf.d")
	path := filepath.Join(dir, DropIn)
	if err := Apply(dir, "/run/systemd/resolve/resolv.conf", "/etc/resolv.conf"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "kind: KubeletConfiguration\nresolvConf: /run/systemd/resolve/resolv.conf\n") {
		t.Errorf("drop-in:\n%s", data)
	}
	// The host's resolv.conf names a real resolver again: the drop-in goes,
	// and a second removal is no error.
	for i := 0; i < 2; i++ {
		if err := Apply(dir, "/etc/resolv.conf", "/etc/resolv.conf"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("drop-in left: %v", err)
	}
	// A link in the drop-in's place is replaced, not written through.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := Apply(dir, "/run/systemd/resolve/resolv.conf", "/etc/resolv.conf"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("written through the link: %q", got)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		t.Errorf("the drop-in is still a link (%v)", err)
	}
}
