package nodeimage

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// usrMergedTree builds a small Debian-like tree: /lib and /lib64 link into
// /usr, iptables goes through /etc/alternatives to a multi-call binary.
func usrMergedTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mk := func(p, content string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, p string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/sbin/xtables-nft-multi", "multi")
	mk("usr/lib/x86_64-linux-gnu/libxtables.so.12.6.0", "lib")
	mk("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "ld")
	ln("usr/lib", "lib")
	ln("usr/lib64", "lib64")
	ln("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2")
	ln("libxtables.so.12.6.0", "usr/lib/x86_64-linux-gnu/libxtables.so.12")
	ln("/etc/alternatives/iptables", "usr/sbin/iptables")
	ln("/usr/sbin/iptables-nft", "etc/alternatives/iptables")
	ln("xtables-nft-multi", "usr/sbin/iptables-nft")
	ln("loop-b", "usr/sbin/loop-a")
	ln("loop-a", "usr/sbin/loop-b")
	return root
}

func TestTreeResolve(t *testing.T) {
	tr := &tree{root: usrMergedTree(t), seen: map[string]bool{}}
	tests := []struct{ in, want string }{
		{"/usr/sbin/iptables", "/usr/sbin/xtables-nft-multi"},
		{"/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{"/lib/x86_64-linux-gnu/libxtables.so.12", "/usr/lib/x86_64-linux-gnu/libxtables.so.12.6.0"},
		{"usr/sbin/../sbin/xtables-nft-multi", "/usr/sbin/xtables-nft-multi"},
	}
	for _, tt := range tests {
		got, err := tr.resolve(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("resolve(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := tr.resolve("/usr/sbin/loop-a"); err == nil {
		t.Error("a symlink loop resolved")
	}
	if _, err := tr.resolve("/usr/sbin/missing"); err == nil {
		t.Error("a missing file resolved")
	}
}

func TestTreeAdd(t *testing.T) {
	tr := &tree{root: usrMergedTree(t), seen: map[string]bool{}}
	for _, p := range []string{"/usr/sbin/iptables", "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libxtables.so.12", "/usr/sbin/iptables"} {
		if _, err := tr.add(p); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, e := range tr.entries {
		if e.Link != "" {
			got[e.Name] = "-> " + e.Link
		} else {
			got[e.Name] = "file"
		}
	}
	want := map[string]string{
		"usr/sbin/xtables-nft-multi":                    "file",
		"usr/sbin/iptables":                             "-> /usr/sbin/xtables-nft-multi",
		"usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": "file",
		"usr/lib64/ld-linux-x86-64.so.2":                "-> /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"usr/lib/x86_64-linux-gnu/libxtables.so.12.6.0": "file",
		"usr/lib/x86_64-linux-gnu/libxtables.so.12":     "-> /usr/lib/x86_64-linux-gnu/libxtables.so.12.6.0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries\n got %v\nwant %v", got, want)
	}
	if len(tr.entries) != len(want) {
		t.Errorf("%d entries for %d paths: duplicates", len(tr.entries), len(want))
	}
}

func TestParseLdd(t *testing.T) {
	out := `/usr/sbin/xtables-nft-multi:
	linux-vdso.so.1 (0x00007ffd5a3f2000)
	libxtables.so.12 => /lib/x86_64-linux-gnu/libxtables.so.12 (0x00007f0c1a2e0000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c1a0ff000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f0c1a35a000)
/usr/sbin/conntrack:
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0c1a0ff000)
/usr/local/bin/static:
	not a dynamic executable
`
	got, err := parseLdd(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/lib/x86_64-linux-gnu/libxtables.so.12", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseLdd\n got %q\nwant %q", got, want)
	}
	if _, err := parseLdd("\tlibmissing.so.1 => not found\n"); err == nil {
		t.Error("a library ldd could not find was accepted")
	}
}
