package lb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process describes a detached `kiln lb` process (or another kiln
// subcommand run the same way) and its files.
type Process struct {
	// Kiln is the kiln binary that runs `kiln lb`.
	Kiln string
	// Subcommand is the kiln command run; ["lb"] when empty.
	Subcommand []string
	// ConfigPath is its configuration file.
	ConfigPath string
	// PIDFile is where it writes its pid once listening.
	PIDFile string
	// LogFile receives its output (appended).
	LogFile string
	// Env is extra environment ("NAME=value") for the process. Where it runs
	// as a systemd unit (see launch) this is all of its environment.
	Env []string
	// Role names the daemon in its unit's name and in errors, e.g.
	// "registry"; the subcommand when empty.
	Role string
}

// ProcessIn describes the load balancer whose files (lb.json, lb.pid,
// lb.log) are in dir, run by the kiln binary kiln.
func ProcessIn(kiln, dir string) Process {
	return Process{
		Kiln:       kiln,
		ConfigPath: filepath.Join(dir, "lb.json"),
		PIDFile:    filepath.Join(dir, "lb.pid"),
		LogFile:    filepath.Join(dir, "lb.log"),
	}
}

// Command returns the argv of the load balancer process; kiln's --dir (where
// its debug log goes) is the configuration's directory.
func (p Process) Command() []string {
	argv := append([]string{p.Kiln, "--dir", filepath.Dir(p.ConfigPath)}, p.subcommand()...)
	return append(argv, "--config", p.ConfigPath, "--pid-file", p.PIDFile)
}

// subcommand returns Subcommand or its default.
func (p Process) subcommand() []string {
	if len(p.Subcommand) > 0 {
		return p.Subcommand
	}
	return []string{"lb"}
}

// role returns Role or the subcommand.
func (p Process) role() string {
	if p.Role != "" {
		return p.Role
	}
	return strings.Join(p.subcommand(), " ")
}

// ErrNotRunning is returned by PID when no load balancer process runs.
var ErrNotRunning = errors.New("load balancer is not running")

// Start launches the process detached from kiln - as a transient systemd
// unit of its own where PID 1 is systemd, else in its own session - with its
// output appended to LogFile, and waits until it has written its pid file,
// which it does once every service listens. If it exits first, the error
// names its log file.
func (p Process) Start(ctx context.Context) (int, error) {
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	os.Remove(p.PIDFile)
	proc, err := p.launch(ctx, logf)
	if err != nil {
		return 0, err
	}
	var pid int
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, false, func(context.Context) (bool, error) {
		if done, err := proc.exited(); done {
			return false, fmt.Errorf("%s %s exited (%v); see %s", filepath.Base(p.Kiln), p.role(), err, p.LogFile)
		}
		var perr error
		pid, perr = p.PID()
		return perr == nil, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			proc.kill()
		}
		return 0, err
	}
	return pid, nil
}

// PID returns the pid of the running process named by the pid file; it
// checks that the pid is a `kiln lb` process with this configuration, so a
// reused pid is never signalled.
func (p Process) PID() (int, error) {
	data, err := os.ReadFile(p.PIDFile)
	if err != nil {
		return 0, ErrNotRunning
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, ErrNotRunning
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0, ErrNotRunning
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if !containsSeq(args, append(p.subcommand(), "--config", p.ConfigPath)) {
		return 0, ErrNotRunning
	}
	return pid, nil
}

// containsSeq reports whether seq appears in args in order, contiguously.
func containsSeq(args, seq []string) bool {
	for i := 0; i+len(seq) <= len(args); i++ {
		match := true
		for j := range seq {
			if args[i+j] != seq[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// Reload asks the running process to re-read its configuration (SIGHUP).
func (p Process) Reload() error {
	pid, err := p.PID()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGHUP)
}

// Stop terminates the running process (SIGTERM, then SIGKILL after
// timeout) and waits for it to exit. Stopping a process that does not run
// is not an error.
func (p Process) Stop(ctx context.Context, timeout time.Duration) error {
	pid, err := p.PID()
	if errors.Is(err, ErrNotRunning) {
		os.Remove(p.PIDFile)
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		if !alive(pid) {
			return true, nil
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(timeout)
		}
		return false, nil
	}); err != nil {
		return err
	}
	os.Remove(p.PIDFile)
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
