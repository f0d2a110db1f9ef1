package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory written by test/bench/timeline.sh (DIR/timeline)")
	images := flag.Bool("images", false, "a row per imported image")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: timeline -dir DIR/timeline [-images]")
		os.Exit(2)
	}
	start, events, err := collect(*dir, *images)
	if err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
		os.Exit(1)
	}
	if err := writeTable(os.Stdout, start, events); err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
		os.Exit(1)
	}
}

// collect reads everything timeline.sh saved in dir and returns the start
// of the command and the events, sorted, with short machine names.
func collect(dir string, images bool) (time.Time, []Event, error) {
	start, err := readStamp(filepath.Join(dir, "start"))
	if err != nil {
		return time.Time{}, nil, err
	}
	var events []Event
	events = append(events, Event{T: start, Name: "kiln create cluster starts", Machine: "host"})
	if end, err := readStamp(filepath.Join(dir, "end")); err == nil {
		events = append(events, Event{T: end, Name: "kiln create cluster exits", Machine: "host"})
	}
	for _, src := range []struct {
		file   string
		parse  func(io.Reader) ([]stampedLine, error)
		events func([]stampedLine) []Event
	}{
		{"create.out", parseStamped, outputEvents},
		{"kiln.log", parseKilnLog, kilnLogEvents},
	} {
		f, err := os.Open(filepath.Join(dir, src.file))
		if err != nil {
			continue // not collected: nothing to show from it
		}
		lines, err := src.parse(f)
		f.Close()
		if err != nil {
			return time.Time{}, nil, fmt.Errorf("%s: %w", src.file, err)
		}
		events = append(events, src.events(lines)...)
	}
	machines, err := os.ReadDir(filepath.Join(dir, "machines"))
	if err != nil {
		return time.Time{}, nil, err
	}
	infraID := ""
	for _, m := range machines {
		if id, ok := strings.CutSuffix(m.Name(), "-bootstrap"); ok {
			infraID = id
		}
	}
	for _, m := range machines {
		if !m.IsDir() || strings.HasPrefix(m.Name(), ".") {
			continue
		}
		ev, err := machineEvents(filepath.Join(dir, "machines", m.Name()), m.Name(), images)
		if err != nil {
			return time.Time{}, nil, fmt.Errorf("machine %s: %w", m.Name(), err)
		}
		events = append(events, ev...)
	}
	for i := range events {
		events[i].Machine = shortName(events[i].Machine, infraID)
	}
	sortEvents(events)
	return start, events, nil
}

// machineEvents reads one machine's saved journal and container logs.
func machineEvents(dir, machine string, images bool) ([]Event, error) {
	var events []Event
	if _, err := os.Stat(filepath.Join(dir, "journal")); err == nil {
		out, err := exec.Command("journalctl", "-D", filepath.Join(dir, "journal"), "-o", "json", "--no-pager").Output()
		if err != nil {
			return nil, fmt.Errorf("journalctl: %w", err)
		}
		entries, err := parseJournal(bytes.NewReader(out))
		if err != nil {
			return nil, err
		}
		events = append(events, journalEvents(machine, entries, images)...)
	}
	// pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
	logs, _ := filepath.Glob(filepath.Join(dir, "pods", "*", "*", "*.log"))
	byContainer := map[string][]criLine{}
	for _, l := range logs {
		container := filepath.Base(filepath.Dir(l))
		if _, ok := containerEvents[container]; !ok {
			continue
		}
		f, err := os.Open(l)
		if err != nil {
			return nil, err
		}
		lines, err := parseCRI(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
		byContainer[container] = append(byContainer[container], lines...)
	}
	for c, lines := range byContainer {
		events = append(events, criEvents(machine, c, lines)...)
	}
	return events, nil
}

// readStamp reads a file holding one $EPOCHREALTIME value.
func readStamp(name string) (time.Time, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return time.Time{}, err
	}
	return parseUnix(string(data))
}

// writeTable prints the events as a table of seconds after start.
func writeTable(w io.Writer, start time.Time, events []Event) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "t+s\tevent\tmachine\tdetail")
	for _, e := range events {
		fmt.Fprintf(tw, "%.1f\t%s\t%s\t%s\n", e.T.Sub(start).Seconds(), e.Name, e.Machine, e.Detail)
	}
	return tw.Flush()
}
