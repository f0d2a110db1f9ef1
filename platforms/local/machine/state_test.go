package machine

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		stat string
		want procInfo
		ok   bool
	}{
		{"4242 (systemd-nspawn) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 2 3",
			procInfo{Comm: "systemd-nspawn", State: 'S', PPID: 1, StartTime: 98765}, true},
		{"7 (a (b) c) Z 3 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 1 2",
			procInfo{Comm: "a (b) c", State: 'Z', PPID: 3, StartTime: 555}, true},
		{"7 (short) S 1", procInfo{}, false},
		{"garbage", procInfo{}, false},
	}
	for _, tt := range tests {
		got, ok := parseProcStat(tt.stat)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseProcStat(%q) = %+v, %v; want %+v, %v", tt.stat, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRecordAndAlive(t *testing.T) {
	m := NewManager(Options{StateRoot: t.TempDir()})
	if r, err := m.readRecord("m0"); r != nil || err != nil {
		t.Fatalf("absent record = %v, %v", r, err)
	}
	self, ok := readProc(os.Getpid())
	if !ok {
		t.Fatal("cannot read own stat")
	}
	os.MkdirAll(m.dir("m0"), 0o700)
	rec := &record{Name: "m0", PID: os.Getpid(), StartTime: self.StartTime, Mode: CgroupV1, Started: time.Unix(0, 0).UTC()}
	if err := m.writeRecord(rec); err != nil {
		t.Fatal(err)
	}
	got, err := m.readRecord("m0")
	if err != nil || *got != *rec {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if !alive(got) {
		t.Errorf("own process not alive")
	}
	got.StartTime++ // the pid was reused by another process
	if alive(got) {
		t.Errorf("reused pid taken for the machine")
	}
	if alive(nil) || alive(&record{}) {
		t.Errorf("no pid is alive")
	}
}
