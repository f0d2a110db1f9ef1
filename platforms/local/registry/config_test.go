package registry

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestWriteConfig checks distribution's configuration against
// testdata/registry.yml.golden (the directory shown as /LB), that it is
// private, that the storage exists, and that ReadAddr reads the address
// back.
func TestWriteConfig(t *testing.T) {
	dir := t.TempDir()
	addr := netip.MustParseAddrPort("10.66.110.1:5001")
	if err := WriteConfig(dir, addr); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := configYAML(addr, "/LB")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "registry.yml.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("configuration differs from %s (run with -update if intended):\n%s", golden, got)
	}
	if want, _ := configYAML(addr, dir); string(data) != string(want) {
		t.Errorf("WriteConfig wrote\n%s\nwant\n%s", data, want)
	}
	if st, err := os.Stat(filepath.Join(dir, ConfigFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v; want 0600", ConfigFile, err, st.Mode())
	}
	if st, err := os.Stat(filepath.Join(dir, StorageDir)); err != nil || !st.IsDir() {
		t.Errorf("storage directory: %v", err)
	}
	if back, err := ReadAddr(dir); err != nil || back != addr {
		t.Errorf("ReadAddr = %v, %v; want %v", back, err, addr)
	}
	if got := PushAddr(addr); got != "127.0.0.1:5001" {
		t.Errorf("PushAddr = %q", got)
	}
	if err := WriteConfig(dir, netip.AddrPort{}); err == nil {
		t.Error("WriteConfig took no address")
	}
}
