package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kiln-project/kiln/platforms/local/machine"
)

// fakeHost is a file-backed Machines and Networks: the provider runs in a
// process the engine starts, so the fake keeps its state in dir where the
// test reads it. machines/<name>.json holds each machine's Spec and
// bridges/<name> each bridge's gateway CIDR.
type fakeHost struct {
	dir string
}

func (f fakeHost) path(kind, name string) string { return filepath.Join(f.dir, kind, name) }

func (f fakeHost) write(kind, name string, data []byte) error {
	if err := os.MkdirAll(filepath.Join(f.dir, kind), 0o755); err != nil {
		return err
	}
	return os.WriteFile(f.path(kind, name), data, 0o600)
}

func (f fakeHost) exists(kind, name string) (bool, error) {
	_, err := os.Stat(f.path(kind, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (f fakeHost) remove(kind, name string) error {
	err := os.Remove(f.path(kind, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Create implements Machines.
func (f fakeHost) Create(_ context.Context, s machine.Spec) error {
	if ok, _ := f.exists("machines", s.Name+".json"); ok {
		return errors.New("machine " + s.Name + " exists")
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return f.write("machines", s.Name+".json", data)
}

// Destroy implements Machines.
func (f fakeHost) Destroy(_ context.Context, name string) error {
	return f.remove("machines", name+".json")
}

// State implements Machines.
func (f fakeHost) State(_ context.Context, name string) (machine.State, error) {
	ok, err := f.exists("machines", name+".json")
	if !ok {
		return machine.StateAbsent, err
	}
	return machine.StateRunning, nil
}

// EnsureBridge implements Networks.
func (f fakeHost) EnsureBridge(_ context.Context, name, gatewayCIDR string) error {
	return f.write("bridges", name, []byte(gatewayCIDR))
}

// DeleteBridge implements Networks.
func (f fakeHost) DeleteBridge(_ context.Context, name string) error {
	return f.remove("bridges", name)
}

// BridgeExists implements Networks.
func (f fakeHost) BridgeExists(_ context.Context, name string) (bool, error) {
	return f.exists("bridges", name)
}

// readSpec returns the Spec the fake recorded for machine name.
func (f fakeHost) readSpec(name string) (machine.Spec, bool) {
	var s machine.Spec
	data, err := os.ReadFile(f.path("machines", name+".json"))
	if err != nil {
		return s, false
	}
	return s, json.Unmarshal(data, &s) == nil
}
