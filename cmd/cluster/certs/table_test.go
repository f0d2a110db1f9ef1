package certs

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestWriteTable(t *testing.T) {
	day := 24 * time.Hour
	root := issue(t, "kiln-root-ca", now.Add(3650*day), nil, true)
	other := issue(t, "corp-ca", now.Add(3650*day), nil, true)
	entries := []Entry{
		{Name: "tls/root-ca", Cert: root.cert},
		{Name: "tls/admin-client", Cert: issue(t, "system:admin", now.Add(365*day), &root, false).cert},
		{Name: "tls/etcd-server", Cert: issue(t, "etcd-server", now.Add(20*day), &root, false).cert},
		{Name: "tls/edge-30d", Cert: issue(t, "edge", now.Add(30*day), &root, false).cert},
		{Name: "tls/old", Cert: issue(t, "old", now.Add(-time.Hour), &root, false).cert},
		{Name: "tls/just-expired", Cert: issue(t, "now", now, &root, false).cert},
		{Name: "node/w0 kubelet serving", Cert: issue(t, "w0@1700000000", now.Add(90*day), nil, false).cert},
		{Name: "node/w1 kubelet serving", Cert: issue(t, "system:node:w1", now.Add(2*time.Hour), &other, false).cert},
		{Name: "node/w2 kubelet serving", Err: errors.New("TLS handshake with 10.66.0.23:10250: connection refused")},
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, entries, entries, now); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("table differs from %s (run with -update if intended):\n%s\nwant:\n%s", golden, buf.Bytes(), want)
	}
}

func TestStatus(t *testing.T) {
	day := 24 * time.Hour
	for _, tt := range []struct {
		notAfter time.Time
		want     string
	}{
		{now.Add(31 * day), StatusOK},
		{now.Add(30 * day), StatusExpiring},
		{now.Add(time.Second), StatusExpiring},
		{now, StatusExpired},
		{now.Add(-day), StatusExpired},
	} {
		e := Entry{Cert: issue(t, "x", tt.notAfter, nil, false).cert}
		if got := e.Status(now); got != tt.want {
			t.Errorf("expiry in %v: status %s, want %s", tt.notAfter.Sub(now), got, tt.want)
		}
	}
	if got := (Entry{Err: errors.New("x")}).Status(now); got != StatusUnknown {
		t.Errorf("unreadable: status %s, want %s", got, StatusUnknown)
	}
}
