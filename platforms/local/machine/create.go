package machine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// bootStartTimeout bounds the wait for the machine's init process.
const bootStartTimeout = 30 * time.Second

// Create prepares the machine's copy-on-write root and boots it. It
// returns once the machine's init runs; use WaitBooted to wait for the
// boot to finish. Creating a machine that runs with the same spec does
// nothing; one that runs with another spec is an error; a stopped machine
// is started again on its existing disk.
func (m *Manager) Create(ctx context.Context, s Spec) error {
	addr, err := s.validate()
	if err != nil {
		return &InvalidError{err}
	}
	l, err := m.starter()
	if err != nil {
		return err
	}
	unlock, err := m.lock(s.Name)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := m.readRecord(s.Name)
	if err != nil {
		return err
	}
	hash := s.hash()
	if err := m.finishStop(ctx, rec); err != nil {
		return err
	}
	if alive(rec) {
		if rec.SpecHash == hash {
			m.log.Debugf("machine %s already runs with this spec", s.Name)
			return nil
		}
		return fmt.Errorf("machine %s already runs with a different spec; destroy it first", s.Name)
	}
	if err := m.release(ctx, s.Name, rec, l); err != nil {
		return fmt.Errorf("cleaning up stopped machine %s: %w", s.Name, err)
	}
	if err := m.clearStopping(s.Name); err != nil {
		return err
	}
	if err := m.boot(ctx, &s, addr, hash, l, false); err != nil {
		if derr := m.destroyLocked(ctx, s.Name); derr != nil {
			m.log.Warnf("cleaning up after failed start of machine %s: %v", s.Name, derr)
		}
		return fmt.Errorf("starting machine %s: %w", s.Name, err)
	}
	return nil
}

// boot prepares the root and starts nspawn. A restart boots the existing
// disk as it is: it writes no file into the root.
func (m *Manager) boot(ctx context.Context, s *Spec, addr netip.Prefix, hash string, l launcher, restart bool) error {
	dir := m.dir(s.Name)
	upper, work, root := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	_, err := os.Stat(upper)
	firstBoot := errors.Is(err, fs.ErrNotExist)
	if restart && firstBoot {
		return fmt.Errorf("machine %s has no disk (%s) to start from", s.Name, upper)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{upper, work, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	targets := bindTargets(s)
	binds := make([]Bind, 0, len(targets)+len(s.Binds))
	for _, target := range targets {
		src := filepath.Join(dir, hostBindDir(target))
		if err := m.seedBindDir(ctx, src, filepath.Join(s.Image, target)); err != nil {
			return err
		}
		binds = append(binds, Bind{Source: src, Target: target})
	}
	binds = append(binds, s.Binds...)

	if err := runQuiet(ctx, m.run, overlayMountArgv(s.Image, upper, work, root)); err != nil {
		return err
	}
	if !restart {
		if err := writeRootFiles(s, addr, root, firstBoot); err != nil {
			return err
		}
	}

	argv := nspawnArgv(nspawnArgs{Name: s.Name, Root: root, Bridge: s.Bridge, Binds: binds, Sysctls: true})
	logPath := filepath.Join(dir, "console.log")
	started := time.Now()
	lim := limits{CPUs: s.CPUs, MemoryBytes: s.MemoryBytes}
	pid, err := l.Start(ctx, s.Name, lim, argv, logPath)
	if err != nil {
		return err
	}
	p, ok := readProc(pid)
	if !ok {
		return fmt.Errorf("nspawn exited at once: %s", tail(logPath))
	}
	rec := &record{Name: s.Name, PID: pid, StartTime: p.StartTime, SpecHash: hash, Mode: l.Mode(),
		Bridge: s.Bridge, Address: addr.String(), Image: s.Image, Started: started.UTC()}
	if err := m.writeRecord(rec); err != nil {
		return err
	}
	leader, err := waitLeader(ctx, rec)
	if err != nil {
		return fmt.Errorf("%w: %s", err, tail(logPath))
	}
	rec.Veth = hostVeth(ctx, leader)
	if err := m.layout.limitInitCgroup(ctx, "/proc", leader, lim); err != nil {
		m.log.Warnf("machine %s: %v", s.Name, err)
	}
	m.log.Infof("machine %s: started (pid %d, init %d, veth %s, cgroup mode %s) in %s",
		s.Name, pid, leader, rec.Veth, rec.Mode, time.Since(started).Round(time.Millisecond))
	return m.writeRecord(rec)
}

// writeRootFiles writes the files that configure the machine into its
// mounted root; a new machine ID only on its first boot.
func writeRootFiles(s *Spec, addr netip.Prefix, root string, firstBoot bool) error {
	var machineID string
	if firstBoot {
		var err error
		if machineID, err = newMachineID(); err != nil {
			return err
		}
	}
	for _, f := range rootFiles(s, addr, machineID) {
		if err := writeInRoot(root, f); err != nil {
			return err
		}
	}
	return enableNetworkd(root)
}

// waitLeader waits until the machine's init runs.
func waitLeader(ctx context.Context, rec *record) (int, error) {
	var leader int
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, bootStartTimeout, true, func(context.Context) (bool, error) {
		if !alive(rec) {
			return false, errors.New("systemd-nspawn exited")
		}
		leader = findLeader(rec.PID)
		return leader > 0, nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return 0, fmt.Errorf("no init process after %s", bootStartTimeout)
	}
	return leader, err
}

// hostVeth names the host end of the machine's veth: host0's peer index,
// read through the machine's own sysfs. It is "" when that is not known
// within 5 s.
func hostVeth(ctx context.Context, leader int) string {
	var name string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/sys/class/net/host0/iflink", leader))
		if err != nil {
			return false, nil
		}
		idx, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return false, nil
		}
		if ifc, err := net.InterfaceByIndex(idx); err == nil {
			name = ifc.Name
		}
		return name != "", nil
	})
	return name
}

// tail returns the end of a log file for an error message.
func tail(path string) string {
	data, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(data))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	if s == "" {
		return "(no output)"
	}
	return "output: " + s
}

// runQuiet runs argv and discards its standard output.
func runQuiet(ctx context.Context, r Runner, argv []string) error {
	_, err := r.Run(ctx, argv...)
	return err
}
