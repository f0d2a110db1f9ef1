package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/sirupsen/logrus"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/machine"
	tf "github.com/kiln-project/kiln/platforms/terraform"
	"github.com/kiln-project/kiln/platforms/terraform/enginetest"
)

// TestMain lets the test binary play kiln: `lb --config` runs the load
// balancer, `service-lb --config` a stand-in for the LoadBalancer Service
// controller, `serve --config` one for the image registry,
// KILN_TEST_PROVIDER_DIR=<dir> serves the provider with a fake host keeping
// its state in dir.
func TestMain(m *testing.M) {
	for i, a := range os.Args {
		if a == "lb" && i+4 < len(os.Args) {
			err := lb.Serve(context.Background(), lb.ServeOptions{ConfigPath: os.Args[i+2], PIDFile: os.Args[i+4], Log: logrus.New()})
			if err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
		if a == "serve" && i+4 < len(os.Args) && os.Args[i+1] == "--config" {
			if err := fakeRegistry(os.Args[i+2], os.Args[i+4]); err != nil {
				fmt.Fprintln(os.Stderr, "registry:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
		if a == "service-lb" && i+4 < len(os.Args) {
			if err := fakeServiceLB(os.Args[i+2], os.Args[i+4]); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	if dir := os.Getenv("KILN_TEST_PROVIDER_DIR"); dir != "" {
		self, _ := os.Executable()
		factory := func(s Settings) (*Backend, error) {
			h := fakeHost{dir: dir}
			return &Backend{Machines: h, Networks: h, Kiln: self, Settings: s}, nil
		}
		if err := Serve(context.Background(), factory); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestGatewayCIDR(t *testing.T) {
	tests := []struct {
		cidr, gateway, want string
	}{
		{"10.66.0.0/24", "10.66.0.1", "10.66.0.1/24"},
		{"10.66.0.0/16", "10.66.3.1", "10.66.3.1/16"},
		{"10.66.0.0/24", "10.67.0.1", ""},
		{"10.66.0.0/24", "10.66.0.0", ""},
		{"10.66.0.0", "10.66.0.1", ""},
		{"10.66.0.0/24", "gw", ""},
	}
	for _, tt := range tests {
		m := networkModel{CIDR: types.StringValue(tt.cidr), Gateway: types.StringValue(tt.gateway)}
		got, err := m.gatewayCIDR()
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("gatewayCIDR(%s, %s) = %q, %v; want %q", tt.cidr, tt.gateway, got, err, tt.want)
		}
	}
}

func TestMachineSpec(t *testing.T) {
	env, _ := types.MapValueFrom(context.Background(), types.StringType, map[string]string{"KILN_ROLE": "master"})
	m := machineModel{
		Name: types.StringValue("demo-master-0"), Bridge: types.StringValue("kiln0"),
		Address: types.StringValue("10.66.0.11/24"), Ignition: types.StringValue(`{"ignition":{}}`),
		Image:       types.StringNull(),
		Hosts:       []hostModel{{IP: types.StringValue("10.66.0.1"), Names: []string{"api.demo.test"}}},
		Routes:      []string{"172.30.0.0/16"},
		Env:         env,
		CPUs:        types.Float64Value(1.5),
		MemoryBytes: types.Int64Value(4 << 30),
		Binds:       []bindModel{{Source: types.StringValue("/usr/bin/kiln"), Target: types.StringValue("/usr/local/bin/kiln"), ReadOnly: types.BoolValue(true)}},
	}
	got, err := m.spec(context.Background(), "/images/node")
	if err != nil {
		t.Fatal(err)
	}
	want := machine.Spec{
		Name: "demo-master-0", Image: "/images/node", Bridge: "kiln0", Address: "10.66.0.11/24",
		Hosts:    []machine.HostEntry{{IP: "10.66.0.1", Names: []string{"api.demo.test"}}},
		Routes:   []string{"172.30.0.0/16"},
		Ignition: []byte(`{"ignition":{}}`), Env: map[string]string{"KILN_ROLE": "master"},
		CPUs: 1.5, MemoryBytes: 4 << 30,
		Binds: []machine.Bind{{Source: "/usr/bin/kiln", Target: "/usr/local/bin/kiln", ReadOnly: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec =\n%+v\nwant\n%+v", got, want)
	}
}

// TestStagesThroughEngine applies and destroys the local platform's stages
// with a real engine, kiln's driver and this provider over a fake host: the
// bridge, the machines' specs, the load balancer process and its in-place
// backend update, recreation of a machine that vanished, destroying the
// bootstrap stage alone, and a second destroy doing nothing.
func TestStagesThroughEngine(t *testing.T) {
	fake := fakeHost{dir: t.TempDir()}
	lbDir := t.TempDir()
	d := engineDriver(t, fake)
	// A loopback VIP nothing else uses, so the balancer's fixed ports are free.
	vip := "127.66." + strconv.Itoa(os.Getpid()%200+1) + ".1"
	vars := tfdata.LocalVars{
		ClusterName: "demo", BaseDomain: "example.test", InfraID: "demo-x7k2p",
		Bridge: "kiln-demo", MachineCIDR: "127.0.0.0/8", APIVIP: vip, ServiceNetwork: []string{"172.30.0.0/16"},
		NodeImage: "/images/node", KilnBinary: "/usr/local/bin/kiln", LBDir: &lbDir,
		BootstrapIgnition: `{"bootstrap":true}`, MasterIgnition: `{"master":true}`, WorkerIgnition: `{"worker":true}`,
		BootstrapAddress: "127.66.0.10", BootstrapInLB: true,
		MasterNames: []string{"demo-x7k2p-master-0"}, MasterAddresses: []string{"127.66.0.11"},
		WorkerNames: []string{"demo-x7k2p-worker-0"}, WorkerAddresses: []string{"127.66.0.21"},
		MasterCPUs: 2, MasterMemoryMiB: 4096, EgressNAT: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, s := range []string{tf.StageNetwork, tf.StageBootstrap, tf.StageCluster} {
		if err := d.Apply(ctx, s, vars); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range []string{tf.StageCluster, tf.StageBootstrap, tf.StageNetwork} {
			d.Destroy(context.Background(), s, vars)
		}
	})

	// Network stage: the bridge and a running balancer on the VIP.
	gw, _ := os.ReadFile(fake.path("bridges", "kiln-demo"))
	if string(gw) != vip+"/8" {
		t.Errorf("bridge address %q, want %s/8", gw, vip)
	}
	if nat, _ := os.ReadFile(fake.path("egress", "kiln-demo")); string(nat) != "127.0.0.0/8" {
		t.Errorf("egress NAT of the bridge = %q, want the machine network 127.0.0.0/8", nat)
	}
	proc := lb.Process{Kiln: testBinary(t), ConfigPath: filepath.Join(lbDir, "demo-x7k2p", "lb.json"),
		PIDFile: filepath.Join(lbDir, "demo-x7k2p", "lb.pid")}
	pid, err := proc.PID()
	if err != nil {
		t.Fatalf("load balancer: %v", err)
	}
	for _, port := range []string{"6443", "22623"} {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(vip, port), time.Second)
		if err != nil {
			t.Errorf("load balancer port %s: %v", port, err)
			continue
		}
		c.Close()
	}

	// Machines: specs as the modules map them.
	master, ok := fake.readSpec("demo-x7k2p-master-0")
	if !ok {
		t.Fatal("master-0 not created")
	}
	if master.Address != "127.66.0.11/8" || string(master.Ignition) != `{"master":true}` ||
		master.MemoryBytes != 4096<<20 || master.CPUs != 2 || master.Image != "/images/node" ||
		master.Env["KILN_ROLE"] != "master" || master.Env["KILN_NODE_IP"] != "127.66.0.11" {
		t.Errorf("master-0 spec = %+v", master)
	}
	wantBind := []machine.Bind{{Source: "/usr/local/bin/kiln", Target: "/usr/local/bin/kiln", ReadOnly: true}}
	if !reflect.DeepEqual(master.Binds, wantBind) {
		t.Errorf("master-0 binds = %+v, want %+v", master.Binds, wantBind)
	}
	if len(master.Hosts) != 4 || master.Hosts[0].IP != vip ||
		strings.Join(master.Hosts[0].Names, " ") != "api.demo.example.test api-int.demo.example.test" {
		t.Errorf("master-0 hosts = %+v", master.Hosts)
	}
	for _, n := range []string{"demo-x7k2p-master-0", "demo-x7k2p-bootstrap", "demo-x7k2p-worker-0"} {
		s, ok := fake.readSpec(n)
		if !ok {
			t.Errorf("%s not created", n)
			continue
		}
		if !reflect.DeepEqual(s.Routes, []string{"172.30.0.0/16"}) {
			t.Errorf("%s routes = %q, want the service network", n, s.Routes)
		}
		if s.Gateway != vip {
			t.Errorf("%s gateway = %q, want the host's address %s (egress NAT)", n, s.Gateway, vip)
		}
	}

	// NAT that vanished (a host reboot empties nftables) is set up again
	// by the next apply of the network stage.
	fake.DisableEgress(ctx, "kiln-demo")
	if err := d.Apply(ctx, tf.StageNetwork, vars); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fake.EgressEnabled(ctx, "kiln-demo"); !ok {
		t.Errorf("egress NAT not set up again after it vanished")
	}

	// A machine that vanished is created again by the next apply.
	fake.Destroy(ctx, "demo-x7k2p-worker-0")
	if err := d.Apply(ctx, tf.StageCluster, vars); err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.readSpec("demo-x7k2p-worker-0"); !ok {
		t.Errorf("worker-0 not recreated after it vanished")
	}

	// A crash or a host reboot: a stopped machine and a dead balancer whose
	// files are left are drift that plan shows as in-place updates; apply
	// starts both again (same machine disk, same balancer configuration),
	// without re-creating anything.
	if err := fake.stop("demo-x7k2p-master-0"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, proc)
	cfgBefore, _ := os.ReadFile(proc.ConfigPath)
	for stage, want := range map[string]map[string][]string{
		tf.StageCluster: {`kilnlocal_machine.master["demo-x7k2p-master-0"]`: {"update"}},
		tf.StageNetwork: {"kilnlocal_load_balancer.api": {"update"}},
	} {
		got, err := d.Plan(ctx, stage, vars)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("plan of stage %s after the crash = %q, want %q", stage, got, want)
		}
	}
	opsBefore := len(fake.ops())
	for _, s := range []string{tf.StageNetwork, tf.StageCluster} {
		if err := d.Apply(ctx, s, vars); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fake.ops()[opsBefore:], []string{"start:demo-x7k2p-master-0"}; !slices.Equal(got, want) {
		t.Errorf("machine operations of the restart = %q, want %q", got, want)
	}
	if st, _ := fake.State(ctx, "demo-x7k2p-master-0"); st != machine.StateRunning {
		t.Errorf("master-0 is %s after apply", st)
	}
	newPID, err := proc.PID()
	if err != nil || newPID == pid {
		t.Errorf("balancer after apply: pid %d (was %d), %v; want a new process", newPID, pid, err)
	}
	if cfgAfter, _ := os.ReadFile(proc.ConfigPath); string(cfgAfter) != string(cfgBefore) {
		t.Errorf("balancer configuration changed by the restart:\n%s\nwas\n%s", cfgAfter, cfgBefore)
	}
	pid = newPID
	for _, s := range []string{tf.StageNetwork, tf.StageCluster} {
		if got, err := d.Plan(ctx, s, vars); err != nil || len(got) != 0 {
			t.Errorf("plan of stage %s after the restart = %q, %v; want no change", s, got, err)
		}
	}

	// kiln stop cluster's last step stops the balancer through the same
	// apply, keeping its files; the state records it, so the next plan
	// sees no drift. kiln start cluster starts it again with them.
	stopped := vars
	stopped.DaemonState = platforms.MachineStopped.String()
	if err := d.Apply(ctx, tf.StageNetwork, stopped); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.PID(); err == nil {
		t.Error("balancer still runs after an apply with daemon_state = stopped")
	}
	if got, err := d.Plan(ctx, tf.StageNetwork, stopped); err != nil || len(got) != 0 {
		t.Errorf("plan of the stopped balancer = %q, %v; want no change", got, err)
	}
	if cfgStopped, _ := os.ReadFile(proc.ConfigPath); string(cfgStopped) != string(cfgBefore) {
		t.Errorf("balancer configuration changed by the stop")
	}
	vars.DaemonState = platforms.MachineRunning.String()
	if err := d.Apply(ctx, tf.StageNetwork, vars); err != nil {
		t.Fatal(err)
	}
	if pid, err = proc.PID(); err != nil {
		t.Fatalf("balancer after start: %v", err)
	}

	// The bootstrap leaves the balancer in place: same process, new config.
	vars.BootstrapInLB = false
	if err := d.Apply(ctx, tf.StageNetwork, vars); err != nil {
		t.Fatal(err)
	}
	if got, err := proc.PID(); err != nil || got != pid {
		t.Errorf("balancer pid after update = %d, %v; want the same process %d", got, err, pid)
	}
	cfg, err := lb.LoadConfig(proc.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(cfg)
	if strings.Contains(string(data), "127.66.0.10") || !strings.Contains(string(data), "127.66.0.11") {
		t.Errorf("balancer config after bootstrap removal: %s", data)
	}
	// Egress NAT: the balancer forwards the machines' DNS (nothing here
	// asks it: its upstreams are this host's resolvers).
	if cfg.DNS == nil {
		t.Errorf("balancer config of a cluster with egress NAT has no DNS forwarder: %s", data)
	}

	// Destroying the bootstrap stage destroys the bootstrap only.
	if err := d.Destroy(ctx, tf.StageBootstrap, vars); err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.readSpec("demo-x7k2p-bootstrap"); ok {
		t.Errorf("bootstrap still exists")
	}
	if _, ok := fake.readSpec("demo-x7k2p-master-0"); !ok {
		t.Errorf("destroying the bootstrap stage removed master-0")
	}

	for _, s := range []string{tf.StageCluster, tf.StageNetwork} {
		if err := d.Destroy(ctx, s, vars); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(fake.dir, "machines"))
	if len(entries) != 0 {
		t.Errorf("%d machines left after destroy", len(entries))
	}
	if ok, _ := fake.EgressEnabled(ctx, "kiln-demo"); ok {
		t.Errorf("egress NAT left after destroy")
	}
	if ok, _ := fake.BridgeExists(ctx, "kiln-demo"); ok {
		t.Errorf("bridge left after destroy")
	}
	if _, err := proc.PID(); err == nil {
		t.Errorf("balancer still running after destroy")
	}
	if _, err := os.Stat(filepath.Dir(proc.ConfigPath)); err == nil {
		t.Errorf("balancer directory left after destroy")
	}
	// A second destroy is a no-op.
	if err := d.Destroy(ctx, tf.StageNetwork, vars); err != nil {
		t.Errorf("second destroy: %v", err)
	}
}

// engineDriver returns a Terraform driver of the local platform's stages
// whose engine (tofu or terraform on PATH; the test is skipped without one)
// runs this provider, served by the test binary over fake. The driver's log
// is shown when the test fails.
func engineDriver(t testing.TB, fake fakeHost) *tf.Driver {
	t.Helper()
	engine := enginetest.Find(t)
	modules, err := tfdata.Platform("local")
	if err != nil {
		t.Fatal(err)
	}
	log := enginetest.Log(t)
	return tf.NewDriver(tf.DriverOptions{
		Engine: engine, Dir: t.TempDir(), Modules: modules, Log: log,
		Providers: []tf.Provider{{Source: Source, Version: Version, Command: []string{testBinary(t)},
			Env: map[string]string{"KILN_TEST_PROVIDER_DIR": fake.dir}}},
	})
}

// testBinary is the path of the test binary, which plays kiln (TestMain).
func testBinary(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// waitGone waits until the balancer's process is gone.
func waitGone(t *testing.T, p lb.Process) {
	t.Helper()
	for range 100 {
		if _, err := p.PID(); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("balancer still runs after SIGKILL")
}
