package machine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
)

// Runner runs the commands the package builds. ExecRunner is the real one;
// tests record argv instead.
type Runner interface {
	// Run runs argv to completion and returns its standard output. A
	// failure is a *CommandError carrying the exit code and standard error.
	Run(ctx context.Context, argv ...string) ([]byte, error)
	// Detach starts argv in a new session, stdin from /dev/null and
	// stdout/stderr appended to logPath, and returns its pid without
	// waiting: the process outlives the caller.
	Detach(argv []string, logPath string) (int, error)
}

// CommandError is a command that could not run or exited non-zero.
type CommandError struct {
	// Argv is the command line.
	Argv []string
	// ExitCode is the exit status, -1 when the command did not run.
	ExitCode int
	// Stderr is the command's standard error, trimmed.
	Stderr string
	// Err is the underlying error.
	Err error
}

// Error names the command and its standard error.
func (e *CommandError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.Argv, " "), e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *CommandError) Unwrap() error { return e.Err }

// ExecRunner runs commands on the host, logging each command line and its
// standard error line by line at Debug level.
type ExecRunner struct {
	// Log receives the command lines and output; nil discards them.
	Log logrus.FieldLogger
}

func (r ExecRunner) log() logrus.FieldLogger {
	if r.Log == nil {
		l := logrus.New()
		l.Out = discard{}
		return l
	}
	return r.Log
}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	log := r.log()
	log.Debugf("run: %s", strings.Join(argv, " "))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	sc := bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
	for sc.Scan() {
		log.Debugf("%s: %s", argv[0], sc.Text())
	}
	if err != nil {
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return stdout.Bytes(), &CommandError{Argv: argv, ExitCode: code, Stderr: strings.TrimSpace(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

// Detach implements Runner.
func (r ExecRunner) Detach(argv []string, logPath string) (int, error) {
	r.log().Debugf("detach: %s (output to %s)", strings.Join(argv, " "), logPath)
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, &CommandError{Argv: argv, ExitCode: -1, Err: err}
	}
	// Reap the child if it ends while this process still runs; if this
	// process ends first, the child is re-parented and keeps running.
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
