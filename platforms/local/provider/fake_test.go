package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/local/registry"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
)

// fakeHost is a file-backed Machines and Networks: the provider runs in a
// process the engine starts, so the fake keeps its state in dir where the
// test reads it. machines/<name>.json holds each machine's Spec and
// bridges/<name> each bridge's gateway CIDR; stopped/<name> marks a stopped
// machine, and ops lists the machine operations, one per line.
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

// op appends an operation to the ops file.
func (f fakeHost) op(verb, name string) error {
	o, err := os.OpenFile(filepath.Join(f.dir, "ops"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = o.WriteString(verb + " " + name + "\n")
	return errors.Join(err, o.Close())
}

// ops returns the operations recorded so far.
func (f fakeHost) ops() []string {
	data, _ := os.ReadFile(filepath.Join(f.dir, "ops"))
	return strings.Fields(strings.ReplaceAll(string(data), " ", ":"))
}

// stop marks a machine stopped, as a crash would.
func (f fakeHost) stop(name string) error { return f.write("stopped", name, nil) }

// Create implements Machines.
func (f fakeHost) Create(_ context.Context, s machine.Spec) error {
	if ok, _ := f.exists("machines", s.Name+".json"); ok {
		return errors.New("machine " + s.Name + " exists")
	}
	if err := f.op("create", s.Name); err != nil {
		return err
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return f.write("machines", s.Name+".json", data)
}

// Destroy implements Machines.
func (f fakeHost) Destroy(_ context.Context, name string) error {
	if err := f.op("destroy", name); err != nil {
		return err
	}
	return errors.Join(f.remove("stopped", name), f.remove("machines", name+".json"))
}

// Start implements Machines: the machine must exist with the same spec,
// compared as the Manager does, by its JSON (an empty list of routes is
// none).
func (f fakeHost) Start(_ context.Context, s machine.Spec) error {
	old, ok := f.readSpec(s.Name)
	if !ok {
		return errors.New("machine " + s.Name + " has no disk")
	}
	a, errA := json.Marshal(old)
	b, errB := json.Marshal(s)
	if errA != nil || errB != nil || string(a) != string(b) {
		return errors.New("machine " + s.Name + " was created with a different spec")
	}
	if err := f.op("start", s.Name); err != nil {
		return err
	}
	return f.remove("stopped", s.Name)
}

// Stop implements Machines.
func (f fakeHost) Stop(_ context.Context, name string) error {
	if err := f.op("stop", name); err != nil {
		return err
	}
	if ok, _ := f.exists("machines", name+".json"); !ok {
		return nil
	}
	return f.stop(name)
}

// State implements Machines.
func (f fakeHost) State(_ context.Context, name string) (machine.State, error) {
	ok, err := f.exists("machines", name+".json")
	if !ok {
		return machine.StateAbsent, err
	}
	if stopped, _ := f.exists("stopped", name); stopped {
		return machine.StateStopped, nil
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

// EnableEgress implements Networks: egress/<bridge> holds the network.
func (f fakeHost) EnableEgress(_ context.Context, bridge string, network netip.Prefix) error {
	return f.write("egress", bridge, []byte(network.String()))
}

// DisableEgress implements Networks.
func (f fakeHost) DisableEgress(_ context.Context, bridge string) error {
	return f.remove("egress", bridge)
}

// EgressEnabled implements Networks.
func (f fakeHost) EgressEnabled(_ context.Context, bridge string) (bool, error) {
	return f.exists("egress", bridge)
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

// fakeServiceLB stands in for `kiln service-lb`: it checks its
// configuration as the controller does, writes its pid file, and runs until
// SIGTERM (it needs no API to talk to).
func fakeServiceLB(configPath, pidFile string) error {
	cfg, err := servicelb.LoadConfig(configPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(cfg.Kubeconfig); err != nil {
		return err
	}
	return runUntilTerm(pidFile)
}

// runUntilTerm writes the process's pid file, as kiln's daemons do once
// they serve, and waits for SIGTERM, then removes it.
func runUntilTerm(pidFile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	return os.Remove(pidFile)
}

// fakeRegistry stands in for kiln's build of the registry: it listens on
// the address of its configuration as the registry does (failing as it
// does when the port is taken), writes its pid file, and runs until
// SIGTERM.
func fakeRegistry(configPath, pidFile string) error {
	addr, err := registry.ReadAddr(filepath.Dir(configPath))
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return runUntilTerm(pidFile)
}
