package machine

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// egressHost is a fake host: a /proc/sys of its own with the forwarding
// switches of lo, eth0, wlan0 and the bridges, default routes through
// eth0 and wlan0, and nft tables listed as loaded.
type egressHost struct {
	t      *testing.T
	run    *fakeRunner
	egress Egress
}

func newEgressHost(t *testing.T, ethForwarding string) *egressHost {
	t.Helper()
	proc := t.TempDir()
	for dev, v := range map[string]string{"lo": "0", "eth0": ethForwarding, "wlan0": "1", "kiln-a": "0", "kiln-b": "0"} {
		dir := filepath.Join(proc, "net", "ipv4", "conf", dev)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "forwarding"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := &fakeRunner{outputs: map[string]string{
		"ip -j -4 route show default": `[{"dst":"default","gateway":"192.0.2.1","dev":"eth0"},{"dst":"default","gateway":"198.51.100.1","dev":"wlan0","metric":600}]`,
		"nft -j list tables ip":       `{"nftables":[{"metainfo":{}},{"table":{"family":"ip","name":"other"}}]}`,
	}}
	return &egressHost{t: t, run: run, egress: Egress{Run: run, RecordDir: t.TempDir(), ProcSys: proc, NetNS: "net:[4026531840]"}}
}

func (h *egressHost) forwarding(dev string) string {
	h.t.Helper()
	data, err := os.ReadFile(h.egress.forwardingPath(dev))
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func (h *egressHost) record() egressRecord {
	h.t.Helper()
	var rec egressRecord
	data, err := os.ReadFile(filepath.Join(h.egress.RecordDir, EgressRecordFile))
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		h.t.Fatal(err)
	}
	return rec
}

// loaded makes nft list the tables of bridges as loaded.
func (h *egressHost) loaded(bridges ...string) {
	var tables []string
	for _, b := range bridges {
		tables = append(tables, `{"table":{"family":"ip","name":"`+EgressTable(b)+`"}}`)
	}
	h.run.outputs["nft -j list tables ip"] = `{"nftables":[` + strings.Join(tables, ",") + `]}`
}

// Two clusters share an uplink: each bridge and the uplinks forward while
// either exists, the uplink that did not forward before gets its value
// back only when the last one goes, and one that did is left as it was.
func TestEgressSharesTheUplinksAndGivesThemBack(t *testing.T) {
	h := newEgressHost(t, "0")
	ctx := context.Background()
	if err := h.egress.Enable(ctx, "kiln-a", netip.MustParsePrefix("10.66.0.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := h.egress.Enable(ctx, "kiln-b", netip.MustParsePrefix("10.66.1.0/24")); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"kiln-a", "kiln-b", "eth0", "wlan0"} {
		if got := h.forwarding(dev); got != "1" {
			t.Errorf("forwarding of %s = %s, want 1", dev, got)
		}
	}
	if got := h.forwarding("lo"); got != "0" {
		t.Errorf("forwarding of lo, no uplink, = %s; want it left at 0", got)
	}
	rec := h.record()
	eth := rec.Uplinks["net:[4026531840] eth0"]
	if eth == nil || eth.Original != "0" || !slices.Equal(eth.Bridges, []string{"kiln-a", "kiln-b"}) {
		t.Fatalf("record of eth0 = %+v, want original 0 and both bridges", eth)
	}
	wantLoads := []string{"nft -f " + filepath.Join(h.egress.RecordDir, "kiln-egress-kiln-a.nft"), "nft -f " + filepath.Join(h.egress.RecordDir, "kiln-egress-kiln-b.nft")}
	var loads []string
	for _, c := range joined(h.run.calls) {
		if strings.HasPrefix(c, "nft -f ") {
			loads = append(loads, c)
		}
	}
	if !slices.Equal(loads, wantLoads) {
		t.Errorf("nft loads = %q, want %q", loads, wantLoads)
	}
	script, err := os.ReadFile(filepath.Join(h.egress.RecordDir, "kiln-egress-kiln-a.nft"))
	if err != nil {
		t.Fatal(err)
	}
	if want := EgressRuleset("kiln-a", netip.MustParsePrefix("10.66.0.0/24"), []string{"eth0"}); string(script) != want {
		t.Errorf("script of kiln-a =\n%s\nwant\n%s", script, want)
	}

	h.loaded("kiln-a", "kiln-b")
	if err := h.egress.Disable(ctx, "kiln-a"); err != nil {
		t.Fatal(err)
	}
	if got := h.forwarding("eth0"); got != "1" {
		t.Errorf("forwarding of eth0 with kiln-b left = %s, want 1", got)
	}
	if !slices.Contains(joined(h.run.calls), "nft delete table ip kiln-egress-kiln-a") {
		t.Errorf("kiln-a's table was not deleted: %q", joined(h.run.calls))
	}
	h.loaded("kiln-b")
	if err := h.egress.Disable(ctx, "kiln-b"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.forwarding("eth0"), "0"; got != want {
		t.Errorf("forwarding of eth0 after the last cluster = %s, want %s as before", got, want)
	}
	if got := h.forwarding("wlan0"); got != "1" {
		t.Errorf("forwarding of wlan0, on before kiln = %s, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(h.egress.RecordDir, EgressRecordFile)); err == nil {
		t.Errorf("record left after the last cluster")
	}
	// Disabling again, or what was never enabled, changes nothing; nor
	// on a host without nft (a sealed cluster's destroy).
	h.loaded()
	if err := h.egress.Disable(ctx, "kiln-b"); err != nil {
		t.Errorf("second Disable: %v", err)
	}
	h.run.errs = map[string]error{"nft -j list tables ip": &CommandError{Argv: []string{"nft"}, ExitCode: -1, Err: exec.ErrNotFound}}
	if err := h.egress.Disable(ctx, "kiln-c"); err != nil {
		t.Errorf("Disable without nft: %v", err)
	}
	// A sealed cluster's destroy on a host where no cluster had NAT
	// leaves no record behind.
	sealed := newEgressHost(t, "0")
	if err := sealed.egress.Disable(ctx, "kiln-a"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(sealed.egress.RecordDir); len(entries) != 0 {
		t.Errorf("Disable on a host without NAT wrote %d files", len(entries))
	}
}

// The ruleset masquerades the machine network out of every interface but
// the bridge, keeps new connections from outside away from the machines,
// and lets a guarded uplink forward nothing new but to the bridge.
func TestEgressRuleset(t *testing.T) {
	got := EgressRuleset("kiln-x", netip.MustParsePrefix("10.66.3.0/24"), []string{"eth0"})
	want := `table ip kiln-egress-kiln-x {}
delete table ip kiln-egress-kiln-x
table ip kiln-egress-kiln-x {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.66.3.0/24 oifname != "kiln-x" masquerade
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		oifname "kiln-x" iifname != "kiln-x" ct state new drop
		iifname "eth0" oifname != "kiln-x" ct state new drop
	}
}
`
	if got != want {
		t.Errorf("ruleset =\n%s\nwant\n%s", got, want)
	}
}

// nft itself accepts the ruleset (check mode, nothing is loaded).
func TestEgressRulesetParses(t *testing.T) {
	nft, err := exec.LookPath("nft")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs nft and root")
	}
	f := filepath.Join(t.TempDir(), "egress.nft")
	if err := os.WriteFile(f, []byte(EgressRuleset("kiln-x", netip.MustParsePrefix("10.66.3.0/24"), []string{"eth0", "wlan0"})), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nft, "-c", "-f", f).CombinedOutput(); err != nil {
		t.Fatalf("nft -c: %v\n%s", err, out)
	}
}

// Bad names and networks are refused before anything changes.
func TestEgressRefusesBadInput(t *testing.T) {
	h := newEgressHost(t, "0")
	for _, tt := range []struct {
		bridge string
		net    netip.Prefix
	}{{"", netip.MustParsePrefix("10.66.0.0/24")}, {"a/b", netip.MustParsePrefix("10.66.0.0/24")}, {"kiln-a", netip.Prefix{}}} {
		if err := h.egress.Enable(context.Background(), tt.bridge, tt.net); err == nil {
			t.Errorf("Enable(%q, %v) succeeded", tt.bridge, tt.net)
		}
	}
	if len(h.run.calls) != 0 {
		t.Errorf("commands ran: %q", joined(h.run.calls))
	}
}
