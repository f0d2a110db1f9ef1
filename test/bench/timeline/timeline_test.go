package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// row is an event without its time, plus the time after a base.
type row struct {
	Sec     float64
	Name    string
	Machine string
}

func rows(base time.Time, ev []Event) []row {
	var out []row
	for _, e := range ev {
		out = append(out, row{Sec: float64(e.T.Sub(base).Milliseconds()) / 1000, Name: e.Name, Machine: e.Machine})
	}
	return out
}

func equalRows(t *testing.T, got, want []row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n got  %v\n want %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestJournalEvents(t *testing.T) {
	entries, err := parseJournal(open(t, "journal.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Msg == "vb-x: entered promiscuous mode" {
			t.Fatal("a kernel record (the host's dmesg) was kept")
		}
	}
	if got := entries[5].Msg; got != "kiln-images: importing kiln.local/etcd:v3" {
		t.Errorf("byte-array MESSAGE decoded as %q", got)
	}
	base := time.UnixMicro(1795399300000000)
	const b, m0, m1 = "boot1-z8whe-bootstrap", "boot1-z8whe-master-0", "boot1-z8whe-master-1"
	equalRows(t, rows(base, journalEvents(b, entries, true)), []row{
		{0.254, "machine boots (first journal record)", b},
		{1.883, "Ignition applied", b},
		{1.938, "containerd started", b},
		{1.955, "image import starts", b},
		{1.990, "importing kiln.local/pause:3.10", b},
		{2.218, "importing kiln.local/etcd:v3", b},
		{10.1, "image import done", b},
		{10.2, "kubelet started", b},
		{11, "node registered (kubelet)", b},
		{20, "temporary API ready (bootkube)", b},
		{30, "etcd learner added", m0},
		{36, "etcd learner promoted", m0},
		{40, "etcd learner added", m1},
		{50, "masters' API servers ready", b},
		{51, "bootstrap etcd member removed (handover)", b},
		{51.5, "bootstrap-complete recorded", b},
	})
	for _, e := range journalEvents(b, entries, false) {
		if e.Name == "importing kiln.local/pause:3.10" {
			t.Error("a row per image without images")
		}
	}
}

func TestJournalRejectsBadRecords(t *testing.T) {
	for _, in := range []string{"not json\n", `{"__REALTIME_TIMESTAMP":"soon","MESSAGE":"x"}` + "\n"} {
		if _, err := parseJournal(bytes.NewBufferString(in)); err == nil {
			t.Errorf("parseJournal(%q) succeeded", in)
		}
	}
}

func TestCRIEvents(t *testing.T) {
	lines, err := parseCRI(open(t, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3 (the malformed one skipped)", len(lines))
	}
	// A restart's log read first must not hide the earlier start.
	lines = append(lines[1:], lines[0])
	base := time.Date(2026, 11, 23, 2, 1, 52, 0, time.UTC)
	equalRows(t, rows(base, criEvents("m", "etcd", lines)), []row{
		{0.1, "etcd starts", "m"},
		{1.5, "etcd serving", "m"},
	})
	if ev := criEvents("m", "kube-scheduler", lines); ev != nil {
		t.Errorf("events for a container without rules: %v", ev)
	}
}

func TestOutputEvents(t *testing.T) {
	lines, err := parseStamped(open(t, "create.out"))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Unix(1795399296, 0)
	equalRows(t, rows(base, outputEvents(lines)), []row{
		{1.658, "kiln: Checking the host", "host"},
		{44.5, "kiln: Waiting up to 20m0s for the Kubernetes API at https://10.66.131.1:6443", "host"},
		{95.852, "Node Ready (kiln)", "boot1-z8whe-worker-0"},
		{96, "Node registered (kiln)", "boot1-z8whe-master-0"},
		{103, "kiln: Waiting for install-complete FAILED", "host"},
	})
	if d := outputEvents(lines)[1].Detail; d != "step took 36.6s" {
		t.Errorf("detail %q", d)
	}
}

func TestKilnLogEvents(t *testing.T) {
	lines, err := parseKilnLog(open(t, "kiln.log"))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 23, 2, 1, 36, 0, time.UTC)
	equalRows(t, rows(base, kilnLogEvents(lines)), []row{
		{4, "machine started (kiln log, 1 s resolution)", "boot1-z8whe-bootstrap"},
	})
}

func TestParseUnix(t *testing.T) {
	for in, want := range map[string]time.Time{
		"1795399296.738360\n": time.Unix(1795399296, 738360000),
		"1795399296":          time.Unix(1795399296, 0),
		"1795399296.5":        time.Unix(1795399296, 500000000),
	} {
		got, err := parseUnix(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseUnix(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseUnix("soon"); err == nil {
		t.Error("parseUnix accepted a word")
	}
}

func TestShortName(t *testing.T) {
	if got := shortName("boot1-z8whe-master-0", "boot1-z8whe"); got != "master-0" {
		t.Errorf("got %q", got)
	}
	if got := shortName("host", "boot1-z8whe"); got != "host" {
		t.Errorf("got %q", got)
	}
}

// TestTable checks the whole table against testdata/table.golden from a
// directory laid out as timeline.sh leaves it (without journals, which
// need journalctl).
func TestTable(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"create.out", "kiln.log"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pods := filepath.Join(dir, "machines", "boot1-z8whe-bootstrap", "pods", "kube-system_etcd-b_1", "etcd")
	if err := os.MkdirAll(pods, 0o755); err != nil {
		t.Fatal(err)
	}
	etcd, err := os.ReadFile(filepath.Join("testdata", "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		filepath.Join(pods, "0.log"): etcd,
		filepath.Join(dir, "start"):  []byte("1795399296.738360\n"),
		filepath.Join(dir, "end"):    []byte("1795399400.000000\n"),
	} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start, events, err := collect(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := writeTable(&got, start, events); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("table differs from %s (go test -update):\n%s", golden, got.Bytes())
	}
}
