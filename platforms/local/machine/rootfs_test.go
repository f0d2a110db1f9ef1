package machine

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func testSpec() *Spec {
	return &Spec{
		Name: "demo-x7k2p-master-0", Image: "/img", Bridge: "kiln0", Address: "10.66.0.11/24",
		Hosts: []HostEntry{
			{IP: "10.66.0.10", Names: []string{"api.demo.example.com", "api-int.demo.example.com"}},
		},
		Routes:   []string{"172.30.0.0/16"},
		Ignition: []byte(`{"ignition":{"version":"3.3.0"}}`),
		Env: map[string]string{"KILN_ROLE": "master", "KILN_NODE_IP": "10.66.0.11",
			"KILN_NODE_NAME": "demo-x7k2p-master-0", "KILN_NOTE": `a "quoted" $value`},
	}
}

func TestRootFiles(t *testing.T) {
	s := testSpec()
	files := rootFiles(s, netip.MustParsePrefix(s.Address), "0123456789abcdef0123456789abcdef")
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "== %s (%o)\n%s", f.Path, f.Mode, f.Data)
		if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
			b.WriteString("\n")
		}
	}
	golden(t, "rootfiles.golden", b.String())

	// With egress NAT the machine's default route and resolver are the
	// host's.
	s.Gateway = "10.66.0.1"
	resolver := false
	for _, f := range rootFiles(s, netip.MustParsePrefix(s.Address), "") {
		if f.Path == networkPath && !strings.Contains(string(f.Data), "\nGateway=10.66.0.1\n") {
			t.Errorf("%s with a gateway:\n%s", networkPath, f.Data)
		}
		if f.Path == "/etc/resolv.conf" {
			resolver = string(f.Data) == "nameserver 10.66.0.1\n"
		}
	}
	if !resolver {
		t.Errorf("/etc/resolv.conf with a gateway does not name it")
	}
	s.Gateway = ""

	// A restart keeps the machine ID.
	for _, f := range rootFiles(s, netip.MustParsePrefix(s.Address), "") {
		if f.Path == "/etc/machine-id" {
			t.Errorf("machine-id written without a new ID")
		}
	}

	// A machine that stands for a user's host gets no kiln files but the
	// sysctl values a container cannot set (bound over /proc/sys).
	s.Ignition, s.Env = nil, nil
	for _, f := range rootFiles(s, netip.MustParsePrefix(s.Address), "") {
		if f.Path == nodelayout.IgnitionConfigFile || strings.HasPrefix(f.Path, "/etc/kiln/") && !strings.HasPrefix(f.Path, sysctlShimDir+"/") {
			t.Errorf("%s written for a spec without Ignition and Env", f.Path)
		}
	}
}

func TestNewMachineID(t *testing.T) {
	a, err := newMachineID()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newMachineID()
	if len(a) != 32 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("machine IDs %q, %q", a, b)
	}
}

func TestWriteInRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	victim := filepath.Join(outside, "hosts")
	os.WriteFile(victim, []byte("host's own\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	// An image whose /etc/hosts is an absolute link, and whose /etc/kiln
	// points outside the root.
	os.Symlink(victim, filepath.Join(root, "etc", "hosts"))
	os.Symlink(outside, filepath.Join(root, "etc", "kiln"))

	if err := writeInRoot(root, rootFile{"/etc/hosts", []byte("machine\n"), 0o644}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "host's own\n" {
		t.Errorf("write followed the link to the host: %q", data)
	}
	if st, err := os.Lstat(filepath.Join(root, "etc", "hosts")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("/etc/hosts not replaced by a file: %v %v", st, err)
	}
	if err := writeInRoot(root, rootFile{"/etc/kiln/node.env", []byte("X=1\n"), 0o644}); err == nil {
		t.Errorf("wrote through a linked directory")
	}
	if _, err := os.Stat(filepath.Join(outside, "node.env")); err == nil {
		t.Errorf("file created outside the root")
	}
	if err := writeInRoot(root, rootFile{"/var/lib/kiln/ignition/config.ign", []byte("{}"), 0o600}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, "var/lib/kiln/ignition/config.ign"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ignition config mode = %v, %v", st.Mode(), err)
	}
}

func TestEnableNetworkd(t *testing.T) {
	root := t.TempDir()
	if err := enableNetworkd(root); err == nil {
		t.Errorf("no error for an image without networkd")
	}
	os.MkdirAll(filepath.Join(root, "lib/systemd/system"), 0o755)
	os.WriteFile(filepath.Join(root, "lib/systemd/system/systemd-networkd.service"), nil, 0o644)
	for range 2 { // idempotent
		if err := enableNetworkd(root); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, networkdWants)); err != nil || l != "/lib/systemd/system/systemd-networkd.service" {
		t.Errorf("link = %q, %v", l, err)
	}
}
