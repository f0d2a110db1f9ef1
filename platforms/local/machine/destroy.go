package machine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// sigPoweroff is SIGRTMIN+4, which makes systemd power off.
const sigPoweroff = syscall.Signal(34 + 4)

// quiesceScript stops kubelet and kills the containers' tasks, which would
// otherwise hold the machine's shutdown for about 90 seconds.
const quiesceScript = `systemctl stop kubelet.service >/dev/null 2>&1
if command -v ctr >/dev/null 2>&1; then
  for ns in $(ctr namespaces ls -q 2>/dev/null); do
    for t in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do ctr -n "$ns" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
  done
fi
true`

// stopScript is quiesceScript for a machine that will boot again: the
// containers' tasks get SIGTERM first (etcd hands its leadership over, the
// API server drains) and SIGKILL only when still running 10 s later.
const stopScript = `systemctl stop kubelet.service >/dev/null 2>&1
if command -v ctr >/dev/null 2>&1; then
  running() { for ns in $(ctr namespaces ls -q 2>/dev/null); do ctr -n "$ns" tasks ls 2>/dev/null | awk -v ns="$ns" '$3 == "RUNNING" { print ns, $1 }'; done; }
  running | while read -r ns t; do ctr -n "$ns" tasks kill "$t" >/dev/null 2>&1; done
  i=0
  while [ "$i" -lt 20 ] && [ -n "$(running)" ]; do sleep 0.5; i=$((i + 1)); done
  running | while read -r ns t; do ctr -n "$ns" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
fi
true`

// quiesceTimeout bounds the quiesce step.
const quiesceTimeout = 45 * time.Second

// Destroy stops the machine and removes everything of it: processes,
// mounts, veth, cgroups and its state directory (its disk). Destroying an
// absent machine succeeds.
func (m *Manager) Destroy(ctx context.Context, name string) error {
	if !nameRE.MatchString(name) {
		return &InvalidError{fmt.Errorf("invalid machine name %q", name)}
	}
	if _, err := m.starter(); err != nil {
		return err
	}
	unlock, err := m.lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	if err := m.destroyLocked(ctx, name); err != nil {
		return fmt.Errorf("destroying machine %s: %w", name, err)
	}
	return nil
}

func (m *Manager) destroyLocked(ctx context.Context, name string) error {
	l, _ := m.starter()
	rec, err := m.readRecord(name)
	if err != nil {
		m.log.Warnf("machine %s: %v; cleaning up without it", name, err)
		rec = nil
	}
	if alive(rec) {
		m.stop(ctx, rec, quiesceScript)
	}
	if err := m.release(ctx, name, rec, l); err != nil {
		return err
	}
	dir := m.dir(name)
	// Never remove a tree with anything mounted in it: that would delete
	// the image or a bind-mounted host directory.
	left, err := hostMountsUnder(dir)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("still mounted, not removing %s: %v", dir, left)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	os.Remove(filepath.Join(m.stateRoot, ".locks", name))
	return nil
}

// stop shuts the running machine down: quiesce (with script), power off,
// wait, kill.
func (m *Manager) stop(ctx context.Context, rec *record, script string) {
	started := time.Now()
	leader := findLeader(rec.PID)
	if leader > 0 {
		qctx, cancel := context.WithTimeout(ctx, quiesceTimeout)
		if _, err := m.run.Run(qctx, nsenterArgv(leader, []string{"/bin/sh", "-c", script})...); err != nil {
			m.log.Debugf("machine %s: quiesce: %v", rec.Name, err)
		}
		cancel()
		_ = syscall.Kill(leader, sigPoweroff)
	} else {
		// nspawn turns SIGTERM into a shutdown request to the machine.
		_ = syscall.Kill(rec.PID, syscall.SIGTERM)
	}
	if waitExit(ctx, rec, m.stopTimeout) {
		m.log.Infof("machine %s: stopped in %s", rec.Name, time.Since(started).Round(time.Millisecond))
		return
	}
	m.log.Warnf("machine %s did not stop within %s; killing it", rec.Name, m.stopTimeout)
	if leader > 0 {
		_ = syscall.Kill(leader, syscall.SIGKILL)
	}
	_ = syscall.Kill(rec.PID, syscall.SIGKILL)
	waitExit(ctx, rec, 10*time.Second)
}

// waitExit waits up to d for the record's nspawn process to end.
func waitExit(ctx context.Context, rec *record, d time.Duration) bool {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return !alive(rec), nil
	}) == nil
}

// release removes what a machine whose nspawn process is gone may have
// left: processes and cgroups, mounts under its state directory, its veth,
// nspawn's propagation directory. It keeps the state directory itself.
func (m *Manager) release(ctx context.Context, name string, rec *record, l launcher) error {
	var errs []error
	if rec != nil && alive(rec) {
		_ = syscall.Kill(rec.PID, syscall.SIGKILL)
		waitExit(ctx, rec, 10*time.Second)
	}
	if err := l.Cleanup(ctx, name); err != nil {
		errs = append(errs, err)
	}
	if err := m.unmountAll(ctx, m.dir(name)); err != nil {
		errs = append(errs, err)
	}
	if rec != nil && rec.Veth != "" {
		if _, err := net.InterfaceByName(rec.Veth); err == nil {
			if err := runQuiet(ctx, m.run, linkDeleteArgv(rec.Veth)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.Remove(filepath.Join("/run/systemd/nspawn/propagate", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Debugf("machine %s: %v", name, err)
	}
	return errors.Join(errs...)
}

// unmountTries is how many times unmountAll unmounts what is left under a
// directory, 200 ms apart; the last time it detaches lazily.
const unmountTries = 11

// unmountAll unmounts everything at or below dir, deepest first; a mount
// that stays busy is detached lazily as a last resort.
func (m *Manager) unmountAll(ctx context.Context, dir string) error {
	var last error
	tries := 0
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Steps: unmountTries}, func(ctx context.Context) (bool, error) {
		mounts, err := hostMountsUnder(dir)
		if err != nil || len(mounts) == 0 {
			last = nil
			return true, err
		}
		tries++
		lazy := tries == unmountTries
		last = nil
		for _, mp := range mounts {
			if err := runQuiet(ctx, m.run, umountArgv(mp, lazy)); err != nil {
				last = err
			}
		}
		return lazy, nil
	})
	if err != nil {
		return err
	}
	return last
}

// linkDeleteArgv deletes a network link.
func linkDeleteArgv(name string) []string {
	return []string{"ip", "link", "delete", "dev", name}
}
