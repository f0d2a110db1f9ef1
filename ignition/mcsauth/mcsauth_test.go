package mcsauth

import (
	"strings"
	"testing"
	"time"
)

func TestFormatParseRoundTrip(t *testing.T) {
	exp := time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)
	in := []Entry{NewEntry("master", "a", exp), NewEntry("worker", "b", exp.Add(time.Hour))}
	out, err := Parse(Format(in...))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Errorf("Parse(Format(%v)) = %v", in, out)
	}
	if strings.Contains(string(Format(in...)), " a ") {
		t.Error("the token file holds a token, not its hash")
	}
}

func TestParseRefusesMalformedLines(t *testing.T) {
	for _, line := range []string{
		"worker",
		"Worker 00 2026-01-01T00:00:00Z",
		"worker 00 2026-01-01T00:00:00Z",
		"worker " + strings.Repeat("0", 64) + " tomorrow",
		"worker " + strings.Repeat("0", 64) + " 2026-01-01T00:00:00Z extra",
	} {
		if _, err := Parse([]byte(line + "\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Parse(%q) = %v, want an error naming line 1", line, err)
		}
	}
}

func TestCheck(t *testing.T) {
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	entries := []Entry{NewEntry("master", "m", now.Add(time.Minute)), NewEntry("worker", "w", now)}
	for _, tc := range []struct {
		role, header string
		want         Verdict
	}{
		{"master", "Bearer m", Allowed},
		{"master", "bearer m", Unauthenticated},
		{"master", "m", Unauthenticated},
		{"master", "Bearer ", Unauthenticated},
		{"master", "", Unauthenticated},
		{"master", "Bearer x", Unauthenticated},
		{"worker", "Bearer m", Forbidden},
		{"worker", "Bearer w", Forbidden}, // expired at now
	} {
		if got := Check(entries, tc.role, tc.header, now); got != tc.want {
			t.Errorf("Check(%s, %q) = %v, want %v", tc.role, tc.header, got, tc.want)
		}
	}
}

func TestNewTokenIsRandom(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if len(a) != 43 || a == b {
		t.Errorf("NewToken() = %q, %q: want two different 43-character tokens", a, b)
	}
}
