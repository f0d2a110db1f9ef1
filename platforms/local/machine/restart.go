package machine

import (
	"context"
	"errors"
	"fmt"
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
	if alive(rec) {
		m.log.Debugf("machine %s already runs", s.Name)
		return nil
	}
	if err := m.release(ctx, s.Name, rec, l); err != nil {
		return fmt.Errorf("cleaning up stopped machine %s: %w", s.Name, err)
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
// absent machine succeeds.
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
		m.stop(ctx, rec, stopScript)
	}
	if err := m.release(ctx, name, rec, l); err != nil {
		return fmt.Errorf("stopping machine %s: %w", name, err)
	}
	return nil
}
