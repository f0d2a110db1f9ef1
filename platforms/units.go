package platforms

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// unitExecTimeout bounds each command FailedUnitsOf runs on a machine.
const unitExecTimeout = 10 * time.Second

// RunFunc runs argv on the machine called name and returns its output; an
// error for a machine that does not run (or cannot be asked) leaves it out.
type RunFunc func(ctx context.Context, name string, argv ...string) ([]byte, error)

// FailedUnitsOf asks systemd on each machine of names, in order, for its
// failed units and each one's last journal line, each command within
// unitExecTimeout: what a platform's UnitChecker reports. A machine whose
// list cannot be read is left out: it may be booting, and its state is
// reported elsewhere.
func FailedUnitsOf(ctx context.Context, run RunFunc, names []string) []FailedUnit {
	var out []FailedUnit
	for _, name := range names {
		list, err := runBounded(ctx, run, name, "systemctl", "--failed", "--no-legend", "--plain")
		if err != nil {
			continue
		}
		for _, unit := range ParseFailedUnits(list) {
			last, _ := runBounded(ctx, run, name, "journalctl", "-u", unit, "-n", "1", "--no-pager", "-o", "cat")
			out = append(out, FailedUnit{Machine: name, Unit: unit, LastLine: lastLine(string(last))})
		}
	}
	return out
}

// runBounded runs argv on machine name within unitExecTimeout.
func runBounded(ctx context.Context, run RunFunc, name string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, unitExecTimeout)
	defer cancel()
	out, err := run(ctx, name, argv...)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", argv[0], name, err)
	}
	return out, nil
}

// ParseFailedUnits reads the unit names from the output of
// `systemctl --failed --no-legend --plain`: the first field of each line
// (a "●" marker before it, which some versions print, is skipped).
func ParseFailedUnits(out []byte) []string {
	var units []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == "●" {
			fields = fields[1:]
		}
		if len(fields) > 0 {
			units = append(units, fields[0])
		}
	}
	return units
}

// lastLine returns the last non-empty line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
