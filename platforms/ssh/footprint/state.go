package footprint

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/shellquote"
)

var (
	//go:embed stop.sh
	stopScript string
	//go:embed start.sh
	startScript string
)

// StoppedFile, in RecordDir, names the units that Stop disabled; while it
// is there the node is stopped, and Start enables them again.
const StoppedFile = "stopped"

// unitsFn is the shell function the scripts that act on kiln's units
// share: kiln_units prints them on one line, the units the record names
// and every unit file that appeared in /etc/systemd/system since the
// record (a master's or worker's config is a pointer, and its units come
// with the full config Ignition fetched). Set before it: rec.
const unitsFn = `kiln_units() {
	{
		cat "$rec/units"
		find /etc/systemd/system -maxdepth 1 -type f | sort | comm -13 "$rec/unit-files" - | sed 's|.*/||'
	} | tr ' ' '\n' | grep . | sort -u | tr '\n' ' '
}
`

// StopScript is the script that stops the node on a host and keeps it
// installed (stop.sh).
func StopScript() string {
	return assign(map[string]string{"rec": RecordDir}) + unitsFn + stopScript
}

// StartScript is the script that starts the node on a host again
// (start.sh).
func StartScript() string {
	return assign(map[string]string{"rec": RecordDir}) + unitsFn + startScript
}

// Stop stops the node on the host at address: its units and pods stop,
// and the units are disabled so that the node stays stopped across the
// host's reboots; every file kiln put there stays, the cluster's data
// with it. It can run again after an interruption.
func Stop(ctx context.Context, h Host, address string) error {
	if out, err := h.RunScript(ctx, address, StopScript()); err != nil {
		return fmt.Errorf("stopping the node: %w%s", err, quoted(out))
	}
	return nil
}

// Start starts the node on the host at address again after Stop: the
// units Stop disabled are enabled, and kiln's enabled units start. On a
// host whose node runs it starts what of kiln's does not.
func Start(ctx context.Context, h Host, address string) error {
	if out, err := h.RunScript(ctx, address, StartScript()); err != nil {
		return fmt.Errorf("starting the node: %w%s", err, quoted(out))
	}
	return nil
}

// State returns the state of the node on the host at address:
// platforms.MachineAbsent when the host keeps no record of kiln's install
// (never installed, or reset), MachineStopped while Stop's list is
// there, else MachineRunning.
func State(ctx context.Context, h Host, address string) (platforms.MachineState, error) {
	rec := shellquote.Quote(RecordDir)
	script := "if [ ! -e " + rec + "/recorded ]; then echo " + platforms.MachineAbsent.String() +
		"; elif [ -e " + rec + "/" + StoppedFile + " ]; then echo " + platforms.MachineStopped.String() +
		"; else echo " + platforms.MachineRunning.String() + "; fi"
	out, err := h.RunScript(ctx, address, script)
	if err != nil {
		return "", fmt.Errorf("reading the host's record: %w%s", err, quoted(out))
	}
	st, err := platforms.ParseMachineState(strings.TrimSpace(string(out)))
	if err != nil {
		return "", fmt.Errorf("reading the host's record: unexpected answer %q", out)
	}
	return st, nil
}

// Recorded reports whether the host at address keeps a record of kiln's
// install: false after a reset, or on a host kiln never installed onto.
func Recorded(ctx context.Context, h Host, address string) (bool, error) {
	st, err := State(ctx, h, address)
	return st != platforms.MachineAbsent && err == nil, err
}
