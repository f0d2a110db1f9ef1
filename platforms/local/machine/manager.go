package machine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultStateRoot is where machines keep their state by default.
const DefaultStateRoot = "/var/lib/kiln/machines"

// Options configure a Manager. The zero value is usable.
type Options struct {
	// StateRoot holds one directory per machine; default DefaultStateRoot.
	StateRoot string
	// Log receives progress at Info and child tools' output at Debug;
	// nil discards.
	Log logrus.FieldLogger
	// Runner runs commands; default ExecRunner with Log.
	Runner Runner
	// Mode forces a cgroup mode; empty detects it (DetectCgroups).
	Mode CgroupMode
	// StopTimeout bounds a machine's shutdown before it is killed;
	// default 60 s.
	StopTimeout time.Duration
}

// Manager creates, inspects and destroys machines. All state is on disk
// under the state root, so any number of Managers (in any processes) may
// work on the same machines. Its methods are safe for concurrent use.
type Manager struct {
	stateRoot   string
	log         logrus.FieldLogger
	run         Runner
	stopTimeout time.Duration
	forcedMode  CgroupMode

	once     sync.Once
	layout   CgroupLayout
	launcher launcher
	initErr  error
}

// NewManager returns a Manager configured by opts.
func NewManager(opts Options) *Manager {
	m := &Manager{stateRoot: opts.StateRoot, log: opts.Log, run: opts.Runner,
		stopTimeout: opts.StopTimeout, forcedMode: opts.Mode}
	if m.stateRoot == "" {
		m.stateRoot = DefaultStateRoot
	}
	if m.log == nil {
		l := logrus.New()
		l.Out = discard{}
		m.log = l
	}
	if m.run == nil {
		m.run = ExecRunner{Log: m.log}
	}
	if m.stopTimeout == 0 {
		m.stopTimeout = 60 * time.Second
	}
	return m
}

// Mode returns the cgroup mode machines are started in.
func (m *Manager) Mode() (CgroupMode, error) {
	l, err := m.starter()
	if err != nil {
		return "", err
	}
	return l.Mode(), nil
}

// starter detects the host's cgroup layout once and picks the launcher.
func (m *Manager) starter() (launcher, error) {
	m.once.Do(func() {
		layout, err := DetectCgroups()
		if err != nil {
			m.initErr = err
			return
		}
		mode := layout.Mode()
		if m.forcedMode != "" {
			mode = m.forcedMode
		}
		m.log.Infof("machines: cgroup mode %s: %s", mode, mode.Describe())
		m.layout = layout
		m.launcher = newLauncher(layout, mode, m.run)
	})
	return m.launcher, m.initErr
}

// newLauncher returns the launcher implementing mode.
func newLauncher(layout CgroupLayout, mode CgroupMode, run Runner) launcher {
	if mode == CgroupSystemd {
		return &systemdLauncher{run: run}
	}
	return &directLauncher{layout: layout, mode: mode, run: run}
}

// State reports whether the machine is running, stopped (something is left,
// or a stop is under way or was interrupted) or absent.
func (m *Manager) State(ctx context.Context, name string) (State, error) {
	if !nameRE.MatchString(name) {
		return "", &InvalidError{fmt.Errorf("invalid machine name %q", name)}
	}
	l, err := m.starter()
	if err != nil {
		return "", err
	}
	rec, err := m.readRecord(name)
	if err != nil {
		return "", err
	}
	if alive(rec) && !m.stopping(name) {
		return StateRunning, nil
	}
	if _, err := os.Lstat(m.dir(name)); err == nil {
		return StateStopped, nil
	}
	if slices.Contains(l.Names(ctx), name) {
		return StateStopped, nil
	}
	return StateAbsent, nil
}

// List returns the names of the machines (running or stopped) starting
// with prefix, sorted; it finds machines by their state directories and by
// their cgroups, so leftovers of a failed run are listed too.
func (m *Manager) List(ctx context.Context, prefix string) ([]string, error) {
	l, err := m.starter()
	if err != nil {
		return nil, err
	}
	names := l.Names(ctx)
	ents, err := os.ReadDir(m.stateRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() && nameRE.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Exec runs argv inside the running machine (in its mount, UTS, IPC,
// network and pid namespaces, with a clean environment) and returns its
// standard output. A non-zero exit is a *CommandError, whose output is
// still returned.
func (m *Manager) Exec(ctx context.Context, name string, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, &InvalidError{errors.New("exec: no command")}
	}
	rec, err := m.readRecord(name)
	if err != nil {
		return nil, err
	}
	if !alive(rec) {
		return nil, fmt.Errorf("machine %s is not running", name)
	}
	leader := findLeader(rec.PID)
	if leader == 0 {
		return nil, fmt.Errorf("machine %s has no init process yet", name)
	}
	return m.run.Run(ctx, nsenterArgv(leader, argv)...)
}

// WaitBooted waits until the machine's systemd has finished booting and
// returns its state: "running", or "degraded" when some unit failed. Any
// other end state, or ctx ending first, is an error.
func (m *Manager) WaitBooted(ctx context.Context, name string) (string, error) {
	var last string
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		out, err := m.Exec(ctx, name, "systemctl", "is-system-running", "--wait")
		last, lastErr = strings.TrimSpace(string(out)), err
		switch last {
		case "running", "degraded", "maintenance", "stopping":
			return true, nil
		}
		// Not up yet: no init process, no system bus, still starting.
		return false, nil
	})
	switch {
	case err != nil:
		return last, fmt.Errorf("machine %s did not finish booting (last state %q, last error %v): %w", name, last, lastErr, err)
	case last == "maintenance" || last == "stopping":
		return last, fmt.Errorf("machine %s booted into state %q", name, last)
	}
	return last, nil
}

// Info describes a machine as recorded on disk and seen on the host.
type Info struct {
	// Name is the machine name.
	Name string
	// State is the machine's state.
	State State
	// PID is the nspawn process; Leader the machine's init (0 when not running).
	PID, Leader int
	// Veth is the host end of the machine's network link.
	Veth string
	// Bridge and Address are the network settings it was created with.
	Bridge, Address string
	// Mode is the cgroup mode it was started in.
	Mode CgroupMode
	// Started is when it was last started.
	Started time.Time
}

// Inspect returns what is known about the machine; an absent machine has
// State StateAbsent and nothing else.
func (m *Manager) Inspect(ctx context.Context, name string) (Info, error) {
	st, err := m.State(ctx, name)
	if err != nil {
		return Info{}, err
	}
	info := Info{Name: name, State: st}
	rec, err := m.readRecord(name)
	if err != nil || rec == nil {
		return info, err
	}
	info.Veth, info.Bridge, info.Address, info.Mode, info.Started = rec.Veth, rec.Bridge, rec.Address, rec.Mode, rec.Started
	if st == StateRunning {
		info.PID, info.Leader = rec.PID, findLeader(rec.PID)
	}
	return info, nil
}
