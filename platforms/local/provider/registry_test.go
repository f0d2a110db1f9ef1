package provider

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/registry"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// registryVars are variables of the network stage with the image registry
// at a free port of a loopback VIP nothing else uses, run by the test
// binary (fakeRegistry), its files in lbDir.
func registryVars(t *testing.T, lbDir string) tfdata.LocalVars {
	t.Helper()
	vip := "127.67." + strconv.Itoa(os.Getpid()%200+1) + ".1"
	return tfdata.LocalVars{
		ClusterName: "demo", BaseDomain: "example.test", InfraID: "demo-x7k2p",
		Bridge: "kiln-demo", MachineCIDR: "127.0.0.0/8", APIVIP: vip,
		NodeImage: "/images/node", KilnBinary: "/usr/local/bin/kiln", LBDir: &lbDir,
		BootstrapIgnition: "{}", MasterIgnition: "{}", WorkerIgnition: "{}",
		BootstrapAddress: "127.67.0.10", BootstrapInLB: true,
		MasterNames: []string{"demo-x7k2p-master-0"}, MasterAddresses: []string{"127.67.0.11"},
		Registry: &tfdata.Registry{Port: freePort(t, vip), Binary: testBinary(t)},
	}
}

// freePort returns a TCP port nothing listens on at addr.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestRegistryThroughEngine applies the network stage with the image
// registry as kiln create, stop, start and destroy cluster do, with a real
// engine and this provider: daemon_state stops and starts the registry in
// place with its storage kept, a plan after each apply shows no drift, a
// killed registry is drift that an apply starts again, a registry running
// without its configuration is not adopted but restarted, a new port
// restarts it in place with its storage, a taken port is an error naming
// the reason and the fields to change, deleting it alone removes its files
// and storage, and destroy stops it before the load balancer removes the
// directory.
func TestRegistryThroughEngine(t *testing.T) {
	fake := fakeHost{dir: t.TempDir()}
	d := engineDriver(t, fake)
	lbDir := t.TempDir()
	vars := registryVars(t, lbDir)
	dir := filepath.Join(lbDir, "demo-x7k2p")
	proc := registry.Process(testBinary(t), dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		d.Destroy(context.Background(), tf.StageNetwork, vars)
		proc.Stop(context.Background(), time.Second)
	})
	apply := func(v tfdata.LocalVars) {
		t.Helper()
		if err := d.Apply(ctx, tf.StageNetwork, v); err != nil {
			t.Fatal(err)
		}
	}
	noDrift := func(v tfdata.LocalVars, when string) {
		t.Helper()
		if got, err := d.Plan(ctx, tf.StageNetwork, v); err != nil || len(got) != 0 {
			t.Errorf("plan %s = %q, %v; want no change", when, got, err)
		}
	}
	serving := func(v tfdata.LocalVars, when string) int {
		t.Helper()
		pid, err := proc.PID()
		if err != nil {
			t.Fatalf("registry %s: %v", when, err)
		}
		addr := net.JoinHostPort(v.APIVIP, strconv.Itoa(v.Registry.Port))
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatalf("registry %s: %v", when, err)
		}
		c.Close()
		if got, err := registry.ReadAddr(dir); err != nil || got.String() != addr {
			t.Errorf("registry %s configured for %v, %v; want %s", when, got, err, addr)
		}
		return pid
	}

	apply(vars)
	pid := serving(vars, "after create")
	noDrift(vars, "after create")
	// Terraform deletes in the reverse order of the dependencies the state
	// records: the registry before the load balancer, whose delete removes
	// the directory with the registry's pid file.
	if deps := stateDependencies(t, d, "kilnlocal_registry"); !slices.Contains(deps, "kilnlocal_load_balancer.api") {
		t.Errorf("the registry's dependencies %q lack the load balancer: destroy may remove its pid file first", deps)
	}
	// An image pushed into it.
	blob := filepath.Join(dir, registry.StorageDir, "docker", "registry", "v2", "blobs", "pushed")
	if err := os.MkdirAll(filepath.Dir(blob), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, []byte("layer"), 0o600); err != nil {
		t.Fatal(err)
	}

	// kiln stop cluster's last step stops it with the API load balancer,
	// keeping its storage; kiln start cluster starts it again with it.
	stopped := vars
	stopped.DaemonState = platforms.MachineStopped.String()
	apply(stopped)
	if !processGone(pid) {
		t.Error("registry runs after daemon_state = stopped")
	}
	noDrift(stopped, "after the stop")
	vars.DaemonState = platforms.MachineRunning.String()
	apply(vars)
	pid = serving(vars, "after start")
	if data, err := os.ReadFile(blob); err != nil || string(data) != "layer" {
		t.Errorf("pushed blob after stop and start: %q, %v", data, err)
	}
	noDrift(vars, "after start")

	// A crash is drift, which an apply starts again.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && !processGone(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := d.Plan(ctx, tf.StageNetwork, vars); err != nil || !reflect.DeepEqual(got, map[string][]string{"kilnlocal_registry.images[0]": {"update"}}) {
		t.Errorf("plan after the registry was killed = %q, %v; want an update of it", got, err)
	}
	apply(vars)
	pid = serving(vars, "after the crash's apply")

	// A registry whose configuration is gone is not Terraform's: the next
	// apply creates the resource and restarts the process, whatever ran.
	if err := os.Remove(filepath.Join(dir, registry.ConfigFile)); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Plan(ctx, tf.StageNetwork, vars); err != nil || !reflect.DeepEqual(got, map[string][]string{"kilnlocal_registry.images[0]": {"create"}}) {
		t.Errorf("plan without the registry's configuration = %q, %v; want it created", got, err)
	}
	apply(vars)
	if newPID := serving(vars, "after its configuration was lost"); newPID == pid || !processGone(pid) {
		t.Errorf("the registry that ran without configuration (pid %d) was adopted: now %d", pid, newPID)
	}

	// Another port: in place, restarted, the storage kept.
	moved := vars
	moved.Registry = &tfdata.Registry{Port: freePort(t, vars.APIVIP), Binary: vars.Registry.Binary}
	if got, err := d.Plan(ctx, tf.StageNetwork, moved); err != nil || !reflect.DeepEqual(got, map[string][]string{"kilnlocal_registry.images[0]": {"update"}}) {
		t.Errorf("plan of a new port = %q, %v; want an update in place", got, err)
	}
	apply(moved)
	pid = serving(moved, "on its new port")
	if _, err := os.Stat(blob); err != nil {
		t.Errorf("pushed blob after the port changed: %v", err)
	}

	// A port taken by another program: the error says so and what to do.
	apply(func() tfdata.LocalVars { v := moved; v.DaemonState = platforms.MachineStopped.String(); return v }())
	taken, err := net.Listen("tcp", netip.AddrPortFrom(netip.MustParseAddr(vars.APIVIP), uint16(moved.Registry.Port)).String())
	if err != nil {
		t.Fatal(err)
	}
	err = d.Apply(ctx, tf.StageNetwork, moved)
	taken.Close()
	if err == nil {
		t.Fatal("registry started on a taken port")
	}
	for _, want := range []string{"the image registry did not start", "address already in use", "platform.local.registryPort"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error of a taken port lacks %q: %v", want, err)
		}
	}
	apply(moved)
	pid = serving(moved, "once the port is free")

	// Without the registry (the add-on off), it alone is deleted: stopped,
	// its files and storage removed, the load balancer's left.
	none := moved
	none.Registry = nil
	apply(none)
	if !processGone(pid) {
		t.Errorf("registry (pid %d) runs after its resource was deleted", pid)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "registry") {
			t.Errorf("%s left after the registry was deleted", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "lb.json")); err != nil {
		t.Errorf("the load balancer's configuration after the registry was deleted: %v", err)
	}
	apply(moved)
	pid = serving(moved, "created again")

	// Destroy: the registry is stopped and its files and storage removed
	// before the load balancer removes the directory.
	if err := d.Destroy(ctx, tf.StageNetwork, moved); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("registry (pid %d) runs after destroy", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("registry directory after destroy: %v", err)
	}
}

// stateDependencies returns the dependencies the network stage's state
// records for the first instance of resource type typ.
func stateDependencies(t *testing.T, d *tf.Driver, typ string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.StageDir(tf.StageNetwork), "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Resources []struct {
			Type      string `json:"type"`
			Instances []struct {
				Dependencies []string `json:"dependencies"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Resources {
		if r.Type == typ && len(r.Instances) > 0 {
			return r.Instances[0].Dependencies
		}
	}
	t.Fatalf("no %s in the state", typ)
	return nil
}
