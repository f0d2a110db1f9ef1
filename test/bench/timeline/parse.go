package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Event is one point of the timeline.
type Event struct {
	T       time.Time
	Name    string // what happened
	Machine string // where: a machine or node name, "host" for kiln itself
	Detail  string
}

// journalEntry is the part of a `journalctl -o json` record the timeline
// reads.
type journalEntry struct {
	T     time.Time
	Ident string // SYSLOG_IDENTIFIER
	Unit  string // _SYSTEMD_UNIT
	Msg   string
}

// parseJournal reads `journalctl -o json` output. Kernel records are left
// out: a machine's journal holds the host's dmesg, not the machine's.
func parseJournal(r io.Reader) ([]journalEntry, error) {
	var out []journalEntry
	err := eachLine(r, func(line string) error {
		var rec struct {
			Transport string          `json:"_TRANSPORT"`
			Realtime  string          `json:"__REALTIME_TIMESTAMP"`
			Ident     string          `json:"SYSLOG_IDENTIFIER"`
			Unit      string          `json:"_SYSTEMD_UNIT"`
			Message   json.RawMessage `json:"MESSAGE"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return fmt.Errorf("journal record: %w", err)
		}
		if rec.Transport == "kernel" {
			return nil
		}
		us, err := strconv.ParseInt(rec.Realtime, 10, 64)
		if err != nil {
			return fmt.Errorf("journal record: __REALTIME_TIMESTAMP %q: %w", rec.Realtime, err)
		}
		out = append(out, journalEntry{T: time.UnixMicro(us), Ident: rec.Ident, Unit: rec.Unit, Msg: journalMessage(rec.Message)})
		return nil
	})
	return out, err
}

// eachLine calls f with every line of r (up to 16 MiB long) until f fails.
func eachLine(r io.Reader, f func(line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if err := f(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// journalMessage decodes MESSAGE, a string or (for non-UTF-8 text) an array
// of bytes.
func journalMessage(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b []byte
	var ints []int
	if json.Unmarshal(raw, &ints) == nil {
		for _, i := range ints {
			b = append(b, byte(i))
		}
	}
	return string(b)
}

// criLine is one line of a container log in the CRI format
// ("<RFC3339Nano> <stream> <P|F> <text>").
type criLine struct {
	T   time.Time
	Msg string
}

// parseCRI reads a CRI container log; lines that do not parse are skipped.
func parseCRI(r io.Reader) ([]criLine, error) {
	var out []criLine
	err := eachLine(r, func(line string) error {
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 4 {
			return nil
		}
		if t, err := time.Parse(time.RFC3339Nano, parts[0]); err == nil {
			out = append(out, criLine{T: t, Msg: parts[3]})
		}
		return nil
	})
	return out, err
}

// stampedLine is one line of kiln's output stamped by timeline.sh
// ("<unix seconds with fraction> <line>").
type stampedLine struct {
	T    time.Time
	Text string
}

// parseStamped reads timeline.sh's stamped output; unstamped lines are
// skipped.
func parseStamped(r io.Reader) ([]stampedLine, error) {
	var out []stampedLine
	err := eachLine(r, func(line string) error {
		stamp, text, ok := strings.Cut(line, " ")
		if !ok {
			return nil
		}
		if t, err := parseUnix(stamp); err == nil {
			out = append(out, stampedLine{T: t, Text: text})
		}
		return nil
	})
	return out, err
}

// parseUnix parses seconds since the epoch with an optional fraction, as
// bash's $EPOCHREALTIME prints them.
func parseUnix(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time stamp %q: %w", s, err)
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("time stamp %q: %w", s, err)
		}
		ns = f
	}
	return time.Unix(n, ns), nil
}

// logrusLine matches a line of kiln's debug log (logrus text format).
var logrusLine = regexp.MustCompile(`^time="([^"]+)" level=\w+ msg="?(.*?)"?$`)

// parseKilnLog reads kiln's debug log (.kiln.log): one-second resolution.
func parseKilnLog(r io.Reader) ([]stampedLine, error) {
	var out []stampedLine
	err := eachLine(r, func(line string) error {
		m := logrusLine.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		if t, err := time.Parse(time.RFC3339, m[1]); err == nil {
			out = append(out, stampedLine{T: t, Text: m[2]})
		}
		return nil
	})
	return out, err
}
