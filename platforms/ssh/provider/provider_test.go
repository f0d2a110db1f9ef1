package provider

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	"github.com/kiln-project/kiln/platforms/ssh/remote"
	tf "github.com/kiln-project/kiln/platforms/terraform"
	"github.com/kiln-project/kiln/platforms/terraform/enginetest"
)

// TestMain lets the test binary serve the provider with a fake host
// keeping its hosts in KILN_TEST_PROVIDER_DIR when the engine starts it.
func TestMain(m *testing.M) {
	if dir := os.Getenv("KILN_TEST_PROVIDER_DIR"); dir != "" {
		factory := func(cfg remote.Config) (footprint.Host, error) {
			if cfg.User == "" || cfg.KnownHostsFile == "" {
				return nil, errors.New("user and known_hosts_file are required")
			}
			return fakeHost{dir: dir}, nil
		}
		if err := Serve(context.Background(), factory); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeHost plays the hosts: each address is a directory in dir holding
// what footprint's scripts would leave on a host (its record, the config,
// the node environment, the payload's name).
type fakeHost struct{ dir string }

func (f fakeHost) path(address string, name ...string) string {
	return filepath.Join(append([]string{f.dir, address}, name...)...)
}

// RunScript answers footprint's scripts by what they print; a node
// stopped has a file "stopped".
func (f fakeHost) RunScript(_ context.Context, address, script string) ([]byte, error) {
	if err := os.MkdirAll(f.path(address), 0o755); err != nil {
		return nil, err
	}
	_, recErr := os.Stat(f.path(address, "recorded"))
	recorded := recErr == nil
	switch {
	case strings.Contains(script, "then echo absent;"):
		_, err := os.Stat(f.path(address, "stopped"))
		switch {
		case !recorded:
			return []byte("absent\n"), nil
		case err == nil:
			return []byte("stopped\n"), nil
		}
		return []byte("running\n"), nil
	case strings.Contains(script, "footprint: node stopped"):
		if !recorded {
			return []byte("no record"), errors.New("exit status 1")
		}
		return nil, os.WriteFile(f.path(address, "stopped"), nil, 0o644)
	case strings.Contains(script, "footprint: node started"):
		if !recorded {
			return []byte("no record"), errors.New("exit status 1")
		}
		return nil, os.RemoveAll(f.path(address, "stopped"))
	case strings.Contains(script, "footprint: recorded $("):
		if recorded {
			return nil, nil
		}
		return nil, os.WriteFile(f.path(address, "recorded"), nil, 0o644)
	case strings.Contains(script, "kiln-ignition.service started"):
		if !recorded {
			return []byte("no record"), errors.New("exit status 1")
		}
		config, err := base64.StdEncoding.DecodeString(assigned(script, "config"))
		if err != nil {
			return nil, err
		}
		os.WriteFile(f.path(address, "env"), []byte(assigned(script, "env")), 0o644)
		return nil, os.WriteFile(f.path(address, "config.ign"), config, 0o644)
	case strings.Contains(script, "footprint: host reset"):
		return nil, os.RemoveAll(f.path(address))
	}
	return nil, errors.New("the fake host does not know this script")
}

// assigned returns the value of the first line name='...' of script.
func assigned(script, name string) string {
	_, rest, ok := strings.Cut("\n"+script, "\n"+name+"='")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "'\n")
	return v
}

// PushDir records the payload's name.
func (f fakeHost) PushDir(_ context.Context, address, src, dir string, _ func(int64)) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	return os.WriteFile(f.path(address, "payload"), []byte(dir), 0o644)
}

func (f fakeHost) read(address, name string) string {
	b, _ := os.ReadFile(f.path(address, name))
	return string(b)
}

// TestHostsThroughEngine applies and destroys the ssh platform's stages
// with a real engine, kiln's driver and this provider over fake hosts:
// each host installed with its role's config and environment, a plan
// after that changes nothing, a host reset by hand installed again, a
// host's node stopped and started in place (and found started by hand), the
// bootstrap stage destroyed alone, every host reset by destroy, and a
// second destroy doing nothing.
func TestHostsThroughEngine(t *testing.T) {
	fake := fakeHost{dir: t.TempDir()}
	d := engineDriver(t, fake)
	payload := filepath.Join(t.TempDir(), "kiln-v1.36.3")
	if err := os.Mkdir(payload, 0o755); err != nil {
		t.Fatal(err)
	}
	vars := tfdata.SSHVars{
		SSHUser: "root", SSHKnownHostsFile: "/dev/null", Payload: payload,
		Bootstrap:         &tfdata.SSHHost{Name: "boot", Address: "192.0.2.10", IP: "192.0.2.10"},
		Masters:           []tfdata.SSHHost{{Name: "m0", Address: "192.0.2.11", IP: "10.0.0.11"}},
		Workers:           []tfdata.SSHHost{{Name: "w0", Address: "192.0.2.21", IP: "10.0.0.21"}},
		BootstrapIgnition: ign("bootstrap"), MasterIgnition: ign("master"), WorkerIgnition: ign("worker"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, s := range []string{tf.StageBootstrap, tf.StageCluster} {
		if err := d.Apply(ctx, s, vars); err != nil {
			t.Fatal(err)
		}
	}
	for address, want := range map[string][2]string{
		"192.0.2.10": {ign("bootstrap"), "KILN_NODE_IP=192.0.2.10\nKILN_ROLE=bootstrap\n"},
		"192.0.2.11": {ign("master"), "KILN_NODE_IP=10.0.0.11\nKILN_ROLE=master\n"},
		"192.0.2.21": {ign("worker"), "KILN_NODE_IP=10.0.0.21\nKILN_ROLE=worker\n"},
	} {
		if got := fake.read(address, "config.ign"); got != want[0] {
			t.Errorf("host %s: config %q, want %q", address, got, want[0])
		}
		if got := fake.read(address, "env"); got != want[1] {
			t.Errorf("host %s: env %q, want %q", address, got, want[1])
		}
		if got := fake.read(address, "payload"); got != "/var/lib/extensions/kiln-v1.36.3" {
			t.Errorf("host %s: payload pushed to %q", address, got)
		}
	}
	changes, err := d.Plan(ctx, tf.StageCluster, vars)
	if err != nil || len(changes) > 0 {
		t.Errorf("plan after apply: changes %v, %v; want none", changes, err)
	}

	// The worker reset by hand: its record is gone, and apply installs it again.
	if err := os.RemoveAll(fake.path("192.0.2.21")); err != nil {
		t.Fatal(err)
	}
	if changes, err := d.Plan(ctx, tf.StageCluster, vars); err != nil || len(changes) != 1 {
		t.Errorf("plan with the worker reset by hand: changes %v, %v; want the worker's", changes, err)
	}
	if err := d.Apply(ctx, tf.StageCluster, vars); err != nil {
		t.Fatal(err)
	}
	if got := fake.read("192.0.2.21", "config.ign"); got != ign("worker") {
		t.Errorf("worker after the re-apply: config %q", got)
	}

	// The worker's node stopped, in place; then started by hand (drift
	// that the next plan shows), and by apply.
	stopped := vars
	stopped.Workers = []tfdata.SSHHost{{Name: "w0", Address: "192.0.2.21", IP: "10.0.0.21", State: "stopped"}}
	if changes, err := d.Plan(ctx, tf.StageCluster, stopped); err != nil || !reflect.DeepEqual(changes, map[string][]string{`kilnssh_host.worker["w0"]`: {"update"}}) {
		t.Errorf("plan with the worker stopped: changes %v, %v; want the worker's update in place", changes, err)
	}
	if err := d.Apply(ctx, tf.StageCluster, stopped); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fake.path("192.0.2.21", "stopped")); err != nil {
		t.Errorf("the worker's node was not stopped: %v", err)
	}
	if fake.read("192.0.2.21", "config.ign") != ign("worker") || fake.read("192.0.2.11", "stopped") != "" {
		t.Error("stopping the worker's node reinstalled it, or touched the master")
	}
	if changes, err := d.Plan(ctx, tf.StageCluster, stopped); err != nil || len(changes) > 0 {
		t.Errorf("plan after the stop: changes %v, %v; want none", changes, err)
	}
	if err := os.Remove(fake.path("192.0.2.21", "stopped")); err != nil {
		t.Fatal(err)
	}
	if changes, err := d.Plan(ctx, tf.StageCluster, stopped); err != nil || len(changes) != 1 {
		t.Errorf("plan with the worker's node started by hand: changes %v, %v; want the worker's", changes, err)
	}
	if err := d.Apply(ctx, tf.StageCluster, stopped); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(ctx, tf.StageCluster, vars); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fake.path("192.0.2.21", "stopped")); !os.IsNotExist(err) {
		t.Errorf("the worker's node was not started again: %v", err)
	}

	// The bootstrap stage alone, then the rest.
	if err := d.Destroy(ctx, tf.StageBootstrap, vars); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fake.path("192.0.2.10")); !os.IsNotExist(err) {
		t.Errorf("the bootstrap host was not reset: %v", err)
	}
	if fake.read("192.0.2.11", "config.ign") == "" {
		t.Error("destroying the bootstrap stage reset the master")
	}
	if err := d.Destroy(ctx, tf.StageCluster, vars); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"192.0.2.11", "192.0.2.21"} {
		if _, err := os.Stat(fake.path(a)); !os.IsNotExist(err) {
			t.Errorf("host %s was not reset: %v", a, err)
		}
	}
	if err := d.Destroy(ctx, tf.StageCluster, vars); err != nil {
		t.Errorf("second destroy: %v", err)
	}
}

// ign is a valid Ignition config that names role.
func ign(role string) string {
	return `{"ignition":{"version":"3.3.0"},"storage":{"directories":[{"path":"/var/lib/` + role + `"}]}}`
}

// engineDriver returns a Terraform driver of the ssh platform's stages
// whose engine (tofu or terraform on PATH; the test is skipped without one)
// runs this provider, served by the test binary over fake.
func engineDriver(t testing.TB, fake fakeHost) *tf.Driver {
	t.Helper()
	engine := enginetest.Find(t)
	modules, err := tfdata.Platform("ssh")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := enginetest.Log(t)
	return tf.NewDriver(tf.DriverOptions{
		Engine: engine, Dir: t.TempDir(), Modules: modules, Log: log,
		Providers: []tf.Provider{{Source: Source, Version: Version, Command: []string{self},
			Env: map[string]string{"KILN_TEST_PROVIDER_DIR": fake.dir}}},
	})
}
