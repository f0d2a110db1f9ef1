package machine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// ErrNoDisk is returned by Start for a machine that has no disk to start
// from: it was never created, or was destroyed.
var ErrNoDisk = errors.New("machine has no disk")

// Start boots a stopped machine again from its existing disk, with the
// same nspawn command line and cgroup handling as Create. Nothing is
// written into its root: its etcd data, certificates, kubelet identity and
// machine ID are kept, and Ignition, which ran at the first boot, does not
// run again. Starting a running machine with the same spec does nothing.
// s must be the spec the machine was created with. A machine that fails to
// start is cleaned up but keeps its disk.
func (m *Manager) Start(ctx context.Context, s Spec) error {
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
	if rec == nil {
		return fmt.Errorf("starting machine %s: %w (create it instead)", s.Name, ErrNoDisk)
	}
	if rec.SpecHash != hash {
		return fmt.Errorf("machine %s was created with a different spec; destroy it first", s.Name)
	}
	if err := m.finishStop(ctx, rec); err != nil {
		return err
	}
	if alive(rec) {
		m.log.Debugf("machine %s already runs", s.Name)
		return nil
	}
	if err := m.release(ctx, s.Name, rec, l); err != nil {
		return fmt.Errorf("cleaning up stopped machine %s: %w", s.Name, err)
	}
	if err := m.clearStopping(s.Name); err != nil {
		return err
	}
	if err := m.boot(ctx, &s, addr, hash, l, true); err != nil {
		if rerr := m.release(ctx, s.Name, rec, l); rerr != nil {
			m.log.Warnf("cleaning up after failed start of machine %s: %v", s.Name, rerr)
		}
		return fmt.Errorf("starting machine %s: %w", s.Name, err)
	}
	return nil
}

// Stop shuts the machine down cleanly and keeps its disk, so Start can
// boot it again: kubelet is stopped, the containers' tasks get SIGTERM
// (SIGKILL when still running 10 s later), then
// systemd powers the machine off (killed after the stop timeout); its
// processes, cgroups, mounts and veth are removed. Stopping a stopped or
// absent machine succeeds. The machine is marked stopping first: if the
// process calling Stop dies half-way (its kubelet may be stopped already),
// the machine is stopped for State, and Start, Create and Stop finish the
// stop before anything else.
func (m *Manager) Stop(ctx context.Context, name string) error {
	if !nameRE.MatchString(name) {
		return &InvalidError{fmt.Errorf("invalid machine name %q", name)}
	}
	l, err := m.starter()
	if err != nil {
		return err
	}
	unlock, err := m.lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := m.readRecord(name)
	if err != nil {
		return err
	}
	if rec == nil {
		return nil
	}
	if alive(rec) {
		if err := atomicfile.Write(m.stoppingPath(name), nil, 0o600); err != nil {
			return fmt.Errorf("stopping machine %s: %w", name, err)
		}
		m.stop(ctx, rec, stopScript)
	}
	if err := m.release(ctx, name, rec, l); err != nil {
		return fmt.Errorf("stopping machine %s: %w", name, err)
	}
	return m.clearStopping(name)
}

// stoppingFile, in a machine's state directory, marks a machine whose Stop
// began and has not finished.
const stoppingFile = "stopping"

// stoppingPath returns the path of the machine's stopping mark.
func (m *Manager) stoppingPath(name string) string {
	return filepath.Join(m.dir(name), stoppingFile)
}

// stopping reports whether the machine is marked stopping.
func (m *Manager) stopping(name string) bool {
	_, err := os.Lstat(m.stoppingPath(name))
	return err == nil
}

// clearStopping removes the stopping mark, once nothing of the machine runs.
func (m *Manager) clearStopping(name string) error {
	if err := os.Remove(m.stoppingPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("machine %s: %w", name, err)
	}
	return nil
}

// finishStop finishes the stop of a machine marked stopping that still
// runs: its kubelet and containers may be stopped already, so it must not
// be taken for running. The caller holds the machine's lock.
func (m *Manager) finishStop(ctx context.Context, rec *record) error {
	if !alive(rec) || !m.stopping(rec.Name) {
		return nil
	}
	m.log.Infof("machine %s: finishing the stop an interrupted run began", rec.Name)
	m.stop(ctx, rec, stopScript)
	if alive(rec) {
		return fmt.Errorf("machine %s: its interrupted stop could not be finished", rec.Name)
	}
	return nil
}
