package nodeimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
)

// Command is a child process kiln runs, as data so that tests can check
// the argv without running anything.
type Command struct {
	Path string
	Args []string
	// Env overrides variables of kiln's own environment.
	Env []string
	Dir string
}

// String returns the command line for logs.
func (c Command) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

// waitDelay is how long a killed command's children may keep its output
// open before run returns.
const waitDelay = 3 * time.Second

// runner runs commands, sending their output line by line to a logger at
// Debug level.
type runner struct {
	log logrus.FieldLogger
	// update, when set, also receives every output line, e.g. to show the
	// latest one as a progress detail.
	update func(line string)
	// env is added to kiln's environment, before each command's own Env.
	env []string
}

// runner returns a runner of b's log and environment (install-config's
// proxy), sending every output line to update too when it is not nil.
func (b *builder) runner(update func(line string)) runner {
	return runner{log: b.log, update: update, env: b.env}
}

// ProxyEnv returns the variables that send kiln's downloads through p,
// install-config's proxy: HTTP_PROXY, HTTPS_PROXY and NO_PROXY in both
// cases (Go reads either, debootstrap's wget only the lower-case ones).
// It returns none when p is nil or names no proxy, or when kiln's
// environment (getenv) names a proxy already: that one is the host's own,
// and wins whole, with its NO_PROXY.
func ProxyEnv(p *types.Proxy, getenv func(string) string) []string {
	if p == nil || p.HTTPProxy == "" && p.HTTPSProxy == "" {
		return nil
	}
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if getenv(v) != "" {
			return nil
		}
	}
	var env []string
	for _, kv := range [][2]string{{"HTTP_PROXY", p.HTTPProxy}, {"HTTPS_PROXY", p.HTTPSProxy}, {"NO_PROXY", p.NoProxy}} {
		if kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
		}
	}
	return env
}

// run runs c and returns its error with the last lines of its output.
func (r runner) run(ctx context.Context, c Command) error {
	_, err := r.output(ctx, c, false)
	return err
}

// output runs c and also returns its standard output when keep is set.
func (r runner) output(ctx context.Context, c Command, keep bool) (string, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), r.env...), c.Env...)
	// A cancelled command is killed with its process group, so that its
	// children (go's compilers, debootstrap's dpkg) stop too; should one
	// escape and hold the output pipe open, run stops waiting after a while.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	log := r.log.WithField("cmd", c.Path)
	log.Debugf("running %s", c)
	tail := &tailLog{log: log, update: r.update}
	var stdout strings.Builder
	if keep {
		cmd.Stdout = &stdout
	} else {
		cmd.Stdout = tail
	}
	cmd.Stderr = tail
	err := cmd.Run()
	tail.flush()
	if err != nil {
		return "", fmt.Errorf("%s: %w%s", c, err, tail.last())
	}
	return stdout.String(), nil
}

// tailLog is an io.Writer that logs complete lines at Debug level and keeps
// the last few for error messages.
type tailLog struct {
	mu      sync.Mutex
	log     logrus.FieldLogger
	update  func(string)
	partial []byte
	lines   []string
}

var _ io.Writer = (*tailLog)(nil)

// tailLines is how many output lines an error message quotes.
const tailLines = 8

// Write implements io.Writer.
func (t *tailLog) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.add(strings.TrimRight(string(t.partial[:i]), "\r"))
		t.partial = t.partial[i+1:]
	}
	return len(p), nil
}

func (t *tailLog) add(line string) {
	t.log.Debug(line)
	if t.update != nil {
		t.update(line)
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[1:]
	}
}

func (t *tailLog) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.partial) > 0 {
		t.add(string(t.partial))
		t.partial = nil
	}
}

// last returns the kept lines as an indented block, or "".
func (t *tailLog) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "\n    " + strings.Join(t.lines, "\n    ")
}
