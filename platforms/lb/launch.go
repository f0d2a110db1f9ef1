package lb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A host daemon (the API load balancer, `kiln service-lb`, and any other
// kiln subcommand run as a Process) must outlive the kiln command that
// starts it. On a host whose PID 1 is systemd, a process started from kiln
// stays in the cgroup of whatever ran kiln - a login session, a CI job, a
// service - and systemd kills it with that unit: the machines would run on
// without an API. There it runs as a transient unit of its own, as machines
// do. Elsewhere it is a child in a session of its own.

// launched is a started daemon: whether it has exited, and how to end it
// when its start is abandoned.
type launched struct {
	// exited reports, without blocking, whether the process has ended and how.
	exited func() (bool, error)
	// kill ends it.
	kill func()
}

// systemdBooted reports whether PID 1 is systemd (sd_booted(3): the
// directory /run/systemd/system exists).
func systemdBooted() bool {
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

// Unit returns the name of the transient systemd unit the process runs as
// on a systemd host: kiln-<role>-<name of the configuration's
// directory>.service, e.g. kiln-lb-demo-x7k2p.service.
func (p Process) Unit() string {
	name := strings.ReplaceAll(p.role(), " ", "-") + "-" + filepath.Base(filepath.Dir(p.ConfigPath))
	return "kiln-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name) + ".service"
}

// systemdRunArgv is the command line that runs the process as a transient
// unit: started once exec succeeded (Type=exec), output appended to its log
// file, garbage-collected when it ends however it ends (--collect), with
// only the environment in p.Env (never kiln's own).
func (p Process) systemdRunArgv() []string {
	argv := []string{"systemd-run",
		"--unit=" + p.Unit(),
		"--description=kiln " + p.role() + " " + filepath.Dir(p.ConfigPath),
		"--collect",
		"--quiet",
		"--working-directory=" + filepath.Dir(p.ConfigPath),
		"--property=Type=exec",
		"--property=StandardOutput=append:" + p.LogFile,
		"--property=StandardError=append:" + p.LogFile,
	}
	for _, kv := range p.Env {
		argv = append(argv, "--setenv="+kv)
	}
	return append(append(argv, "--"), p.Command()...)
}

// launch starts the process detached: as a transient unit where PID 1 is
// systemd, else in a session of its own with its output appended to logf.
func (p Process) launch(ctx context.Context, logf *os.File) (launched, error) {
	if systemdBooted() {
		return p.launchUnit(ctx)
	}
	argv := p.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = filepath.Dir(p.ConfigPath)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return launched{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return launched{
		exited: func() (bool, error) {
			select {
			case err := <-done:
				return true, err
			default:
				return false, nil
			}
		},
		kill: func() { cmd.Process.Kill() },
	}, nil
}

// launchUnit runs the process as its transient unit. A unit of that name
// left from before (its process no longer the daemon, or failed) is
// stopped first.
func (p Process) launchUnit(ctx context.Context) (launched, error) {
	unit := p.Unit()
	_ = exec.CommandContext(ctx, "systemctl", "stop", unit).Run()
	_ = exec.CommandContext(ctx, "systemctl", "reset-failed", unit).Run()
	argv := p.systemdRunArgv()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return launched{}, fmt.Errorf("%s: %w: %s", strings.Join(argv[:2], " "), err, strings.TrimSpace(string(out)))
	}
	out, err := exec.CommandContext(ctx, "systemctl", "show", "--property=MainPID", "--value", unit).Output()
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil || pid <= 0 {
		// Type=exec: the unit has a main process once systemd-run returns;
		// none means it has ended already.
		return launched{exited: func() (bool, error) { return true, fmt.Errorf("unit %s has no main process", unit) }, kill: func() {}}, nil
	}
	return launched{
		exited: func() (bool, error) {
			if alive(pid) {
				return false, nil
			}
			return true, fmt.Errorf("unit %s ended", unit)
		},
		kill: func() { _ = exec.Command("systemctl", "stop", unit).Run() },
	}, nil
}
