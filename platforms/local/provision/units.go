package provision

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

var _ platforms.UnitChecker = (*Provisioner)(nil)

// unitExecTimeout bounds each command FailedUnits runs in a machine.
const unitExecTimeout = 10 * time.Second

// machineExecer is what FailedUnits needs of a *machine.Manager.
type machineExecer interface {
	State(ctx context.Context, name string) (machine.State, error)
	Exec(ctx context.Context, name string, argv ...string) ([]byte, error)
}

// FailedUnits implements platforms.UnitChecker: it asks systemd inside
// each running machine of c (the bootstrap machine until bootstrap is
// done, the masters, the workers) for its failed units and each one's
// last journal line.
func (p *Provisioner) FailedUnits(ctx context.Context, c *platforms.Cluster) ([]platforms.FailedUnit, error) {
	var names []string
	if !c.BootstrapDone {
		names = append(names, bootstrapMachine(c.InfraID))
	}
	names = append(names, c.Machines().All()...)
	return failedUnits(ctx, p.machines(), names), nil
}

// failedUnits asks each running machine of names, in order, for its
// failed units. A machine that does not run or does not answer is left
// out: it may be booting, and its state is reported elsewhere.
func failedUnits(ctx context.Context, m machineExecer, names []string) []platforms.FailedUnit {
	var out []platforms.FailedUnit
	for _, name := range names {
		if st, err := m.State(ctx, name); err != nil || st != machine.StateRunning {
			continue
		}
		list, err := execBounded(ctx, m, name, "systemctl", "--failed", "--no-legend", "--plain")
		if err != nil {
			continue
		}
		for _, unit := range parseFailedUnits(list) {
			last, _ := execBounded(ctx, m, name, "journalctl", "-u", unit, "-n", "1", "--no-pager", "-o", "cat")
			out = append(out, platforms.FailedUnit{Machine: name, Unit: unit, LastLine: lastLine(string(last))})
		}
	}
	return out
}

// execBounded runs argv in machine name within unitExecTimeout.
func execBounded(ctx context.Context, m machineExecer, name string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, unitExecTimeout)
	defer cancel()
	out, err := m.Exec(ctx, name, argv...)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", argv[0], name, err)
	}
	return out, nil
}

// parseFailedUnits reads the unit names from the output of
// `systemctl --failed --no-legend --plain`: the first field of each line
// (a "●" marker before it, which some versions print, is skipped).
func parseFailedUnits(out []byte) []string {
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
