package provision

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
	"github.com/kiln-project/kiln/platforms/terraform"
	"github.com/kiln-project/kiln/platforms/terraform/terraformtest"
)

// stepSummary is what a step asks for: its stage and title, the machines
// its variables stop, and its daemon's state.
type stepSummary struct {
	stage, title string
	stopped      []string
	daemon       platforms.MachineState
}

// summarize returns the summary of each step, read after every step was
// built, so a step that changed an earlier one's variables shows.
func summarize(t *testing.T, steps []step) []stepSummary {
	t.Helper()
	var out []stepSummary
	for _, s := range steps {
		out = append(out, summary(t, s.stage, s.title, s.vars))
	}
	return out
}

// summary is the summary of variables applied to stage under title; every
// state in them must be a word of platforms.DesiredStates.
func summary(t *testing.T, stage, title string, v tfdata.LocalVars) stepSummary {
	t.Helper()
	sum := stepSummary{stage: stage, title: title}
	if v.DaemonState != "" {
		st, err := platforms.ParseDesiredState(v.DaemonState)
		if err != nil {
			t.Fatalf("stage %s: daemon_state: %v", stage, err)
		}
		sum.daemon = st
	}
	for n, word := range v.MachineStates {
		st, err := platforms.ParseDesiredState(word)
		if err != nil {
			t.Fatalf("stage %s: machine_states[%s]: %v", stage, n, err)
		}
		if st == platforms.MachineStopped {
			sum.stopped = append(sum.stopped, n)
		}
	}
	slices.Sort(sum.stopped)
	return sum
}

// routeStages are the stages of a cluster with masters 0, 1, 2 and 10 and
// two workers, the bootstrap machine still there.
func routeStages() stages {
	infra := "demo-x7k2p"
	net := tfdata.LocalVars{InfraID: infra, BootstrapInLB: true}
	boot := net
	cluster := tfdata.LocalVars{InfraID: infra,
		MasterNames:   []string{infra + "-master-0", infra + "-master-1", infra + "-master-10", infra + "-master-2"},
		WorkerNames:   []string{infra + "-worker-0", infra + "-worker-1"},
		ServiceLBPool: &tfdata.AddressRange{First: "10.66.0.192", Last: "10.66.0.254"},
	}
	return stages{network: net, bootstrap: &boot, cluster: &cluster}
}

func TestStoppingSteps(t *testing.T) {
	const n, b, c = terraform.StageNetwork, terraform.StageBootstrap, terraform.StageCluster
	off := platforms.MachineStopped
	w := []string{"demo-x7k2p-worker-0", "demo-x7k2p-worker-1"}
	with := func(names ...string) []string { return slices.Sorted(slices.Values(append(slices.Clone(w), names...))) }
	want := []stepSummary{
		{c, "Stopping the LoadBalancer Service controller, demo-x7k2p-worker-0, demo-x7k2p-worker-1", w, off},
		{b, "Stopping demo-x7k2p-bootstrap", []string{"demo-x7k2p-bootstrap"}, ""},
		{c, "Stopping demo-x7k2p-master-10", with("demo-x7k2p-master-10"), off},
		{c, "Stopping demo-x7k2p-master-2", with("demo-x7k2p-master-10", "demo-x7k2p-master-2"), off},
		{c, "Stopping demo-x7k2p-master-1", with("demo-x7k2p-master-1", "demo-x7k2p-master-10", "demo-x7k2p-master-2"), off},
		{c, "Stopping demo-x7k2p-master-0", with("demo-x7k2p-master-0", "demo-x7k2p-master-1", "demo-x7k2p-master-10", "demo-x7k2p-master-2"), off},
		{n, "Stopping the API load balancer", nil, off},
	}
	s := routeStages()
	if got := summarize(t, s.stopping()); !reflect.DeepEqual(got, want) {
		t.Errorf("stop steps =\n%+v\nwant\n%+v", got, want)
	}
	if len(s.cluster.MachineStates) != 0 || s.cluster.DaemonState != "" {
		t.Errorf("stopping changed the stages' variables: %v %q", s.cluster.MachineStates, s.cluster.DaemonState)
	}

	// No bootstrap machine, no workers, no LoadBalancer Service controller:
	// the masters, then the load balancer.
	s.bootstrap, s.cluster.WorkerNames, s.cluster.ServiceLBPool = nil, nil, nil
	s.cluster.MasterNames = []string{"demo-x7k2p-master-0"}
	want = []stepSummary{
		{c, "Stopping demo-x7k2p-master-0", []string{"demo-x7k2p-master-0"}, off},
		{n, "Stopping the API load balancer", nil, off},
	}
	if got := summarize(t, s.stopping()); !reflect.DeepEqual(got, want) {
		t.Errorf("stop steps of a single master =\n%+v\nwant\n%+v", got, want)
	}
	// A create interrupted before the cluster stage: the load balancer.
	if got := summarize(t, stages{network: s.network}.stopping()); !reflect.DeepEqual(got, want[1:]) {
		t.Errorf("stop steps without a cluster stage = %+v, want %+v", got, want[1:])
	}
	// With the registry add-on, the last step stops the registry too and
	// keeps its variables, so it stops rather than goes.
	reg := &tfdata.Registry{Port: 5001, Binary: "/cache/registry"}
	s.network.Registry = reg
	want[1].title = "Stopping the API load balancer and the image registry"
	steps := s.stopping()
	if got := summarize(t, steps); !reflect.DeepEqual(got, want) {
		t.Errorf("stop steps with the registry =\n%+v\nwant\n%+v", got, want)
	}
	if got := steps[len(steps)-1].vars.Registry; got != reg {
		t.Errorf("the last stop step's registry = %+v, want %+v", got, reg)
	}
}

func TestRunningSteps(t *testing.T) {
	s := routeStages()
	s.cluster.MachineStates = map[string]string{"demo-x7k2p-master-1": "stopped"}
	s.network.DaemonState = "stopped"
	steps := s.running(titles{network: "n", bootstrap: "b", cluster: "c"})
	want := []stepSummary{
		{terraform.StageNetwork, "n", nil, platforms.MachineRunning},
		{terraform.StageBootstrap, "b", nil, ""},
		{terraform.StageCluster, "c", nil, platforms.MachineRunning},
	}
	if got := summarize(t, steps); !reflect.DeepEqual(got, want) {
		t.Fatalf("start steps =\n%+v\nwant\n%+v", got, want)
	}
	// Every machine is named running, so the variables say what runs.
	for i, names := range [][]string{{"demo-x7k2p-bootstrap"}, append(slices.Clone(s.cluster.MasterNames), s.cluster.WorkerNames...)} {
		v := steps[i+1].vars
		if len(v.MachineStates) != len(names) {
			t.Errorf("step %s states %v, want each of %q running", steps[i+1].stage, v.MachineStates, names)
		}
		for _, n := range names {
			if v.MachineStates[n] != platforms.MachineRunning.String() {
				t.Errorf("step %s: %s is %q", steps[i+1].stage, n, v.MachineStates[n])
			}
		}
	}
	if got := summarize(t, stages{network: s.network}.running(titles{network: "n"})); len(got) != 1 || got[0].stage != terraform.StageNetwork {
		t.Errorf("start steps of a network stage alone = %+v", got)
	}
}

func TestLastFirst(t *testing.T) {
	got := lastFirst("c-x", []string{"c-x-master-0", "other", "c-x-master-10", "c-x-master-2", "c-x-master-1", "c-x-master-02"})
	want := []string{"c-x-master-10", "c-x-master-2", "c-x-master-1", "c-x-master-0", "c-x-master-02", "other"}
	if !slices.Equal(got, want) {
		t.Errorf("lastFirst = %q, want %q", got, want)
	}
}

// titleLog records the progress lines started.
type titleLog struct {
	mu     sync.Mutex
	titles []string
}

func (l *titleLog) Start(title string) func(error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.titles = append(l.titles, title)
	return func(error) {}
}

func (l *titleLog) Update(string) {}

// routeRegistryBinary is the registry binary of routeFixture's provisioner.
const routeRegistryBinary = "/cache/components/registry-1/bin/registry"

// routeFixture is a provisioner whose engine is the fake of terraformtest
// (tofu on PATH), and a cluster of 3 masters and 1 worker, with the
// registry add-on, to provision.
type routeFixture struct {
	p       *Provisioner
	c       *platforms.Cluster
	varsDir string
}

func newRouteFixture(t *testing.T) *routeFixture {
	t.Helper()
	bin := t.TempDir()
	terraformtest.Engine(t, bin, terraform.OpenTofu, "1.12.6")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(terraformtest.LogEnv, filepath.Join(t.TempDir(), "invocations"))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "auth"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, installdir.AdminKubeconfig), []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := planConfig(3, 1)
	cfg.Platform.Local.NodeImage = "/images/node"
	cfg.Platform.Local.RegistryPort = 5001
	log, _ := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	return &routeFixture{
		p: &Provisioner{Env: platforms.Env{Log: log, Progress: &titleLog{}, CacheDir: t.TempDir(), Kiln: "/usr/local/bin/kiln"},
			EnsureRegistry: func(context.Context, nodeimage.Options) (string, error) { return routeRegistryBinary, nil }},
		c: &platforms.Cluster{Dir: dir, Config: cfg, Resolved: types.Resolved{MachineNetwork: machineNet(cfg)}, InfraID: "demo-x7k2p",
			Bootstrap: []byte("{}"), Master: []byte("{}"), Worker: []byte("{}")},
	}
}

// record starts recording applies (and makes apply number failAt fail,
// unless 0) into a new directory.
func (f *routeFixture) record(t *testing.T, failAt string) {
	f.varsDir = t.TempDir()
	t.Setenv(terraformtest.VarsDirEnv, f.varsDir)
	t.Setenv(terraformtest.FailAtEnv, failAt)
}

// applied returns the summary of each apply recorded.
func (f *routeFixture) applied(t *testing.T) []stepSummary {
	t.Helper()
	var out []stepSummary
	for _, a := range terraformtest.Applies(t, f.varsDir) {
		var v tfdata.LocalVars
		if err := json.Unmarshal(a.Vars, &v); err != nil {
			t.Fatalf("variables of stage %s: %v", a.Stage, err)
		}
		out = append(out, summary(t, a.Stage, "", v))
	}
	return out
}

// lastVars returns the variables each stage was last applied with.
func (f *routeFixture) lastVars(t *testing.T) map[string]tfdata.LocalVars {
	t.Helper()
	drv, err := f.p.driver(context.Background(), f.c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]tfdata.LocalVars{}
	for _, s := range []string{terraform.StageNetwork, terraform.StageBootstrap, terraform.StageCluster} {
		v, err := stageVars(drv, s)
		if err != nil {
			t.Fatal(err)
		}
		out[s] = v
	}
	return out
}

// TestRouteThroughEngine runs create, stop and start of a cluster through
// kiln's Terraform driver with a fake engine: each is a series of applies
// whose variables say which machines and daemons run, stop and start end
// with the variables create applied (but for the states), and a stop or
// start killed at any apply converges when run again.
func TestRouteThroughEngine(t *testing.T) {
	f := newRouteFixture(t)
	ctx := context.Background()
	f.record(t, "")
	if err := f.p.Provision(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	on := platforms.MachineRunning
	created := []stepSummary{
		{terraform.StageNetwork, "", nil, on},
		{terraform.StageBootstrap, "", nil, ""},
		{terraform.StageCluster, "", nil, on},
	}
	if got := f.applied(t); !reflect.DeepEqual(got, created) {
		t.Fatalf("create applied\n%+v\nwant\n%+v", got, created)
	}
	afterCreate := f.lastVars(t)
	if v := afterCreate[terraform.StageCluster]; v.ServiceLBPool == nil || v.ServiceLBKubeconfig != "apiVersion: v1\n" {
		t.Errorf("cluster stage without its LoadBalancer Service controller: %+v", v.ServiceLBPool)
	}
	if v := afterCreate[terraform.StageNetwork]; v.ServiceLBKubeconfig != "" {
		t.Errorf("the network stage got the admin kubeconfig")
	}
	wantRegistry := tfdata.Registry{Port: 5001, Binary: routeRegistryBinary}
	if v := afterCreate[terraform.StageNetwork]; v.Registry == nil || *v.Registry != wantRegistry {
		t.Errorf("network stage's registry = %+v, want %+v", v.Registry, wantRegistry)
	}
	for _, s := range []string{terraform.StageBootstrap, terraform.StageCluster} {
		if v := afterCreate[s]; v.Registry != nil {
			t.Errorf("stage %s got the registry: %+v", s, v.Registry)
		}
	}
	if got := f.p.Env.Progress.(*titleLog).titles; !slices.ContainsFunc(got, func(s string) bool {
		return strings.HasSuffix(s, ", and the image registry localhost:5001 (the nodes pull from 10.66.0.1:5001)")
	}) {
		t.Errorf("create's progress lines %q do not name the image registry", got)
	}
	for _, s := range []string{terraform.StageNetwork, terraform.StageBootstrap, terraform.StageCluster} {
		st, err := os.Stat(filepath.Join(f.c.Dir, ".kiln/terraform", s, "kiln.tfvars.json"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("tfvars of stage %s: %v, %v; want mode 0600", s, st, err)
		}
	}

	// An uninterrupted stop, as the steps say.
	f.record(t, "")
	if err := f.p.Stop(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	drv, err := f.p.driver(ctx, f.c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := lastStages(drv, f.c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var wantStop []stepSummary
	for _, w := range summarize(t, routeStagesFrom(afterCreate).stopping()) {
		w.title = ""
		wantStop = append(wantStop, w)
	}
	if got := f.applied(t); !reflect.DeepEqual(got, wantStop) {
		t.Fatalf("stop applied\n%+v\nwant\n%+v", got, wantStop)
	}
	stopped := f.lastVars(t)
	if v := stopped[terraform.StageNetwork]; !reflect.DeepEqual(v.Registry, afterCreate[terraform.StageNetwork].Registry) {
		t.Errorf("stop changed the registry's variables to %+v: it is to stop, keeping its storage, not go", v.Registry)
	}
	if s.cluster == nil || len(s.cluster.MachineStates) != 4 {
		t.Errorf("cluster stage after stop: %+v", s.cluster)
	}
	wantTitles := []string{"Stopping the LoadBalancer Service controller, demo-x7k2p-worker-0", "Stopping demo-x7k2p-bootstrap",
		"Stopping demo-x7k2p-master-2", "Stopping demo-x7k2p-master-1", "Stopping demo-x7k2p-master-0", "Stopping the API load balancer and the image registry"}
	if got := f.p.Env.Progress.(*titleLog).titles; !slices.Equal(got[len(got)-len(wantTitles):], wantTitles) {
		t.Errorf("progress lines of stop = %q, want %q at the end", got, wantTitles)
	}

	// Start brings back exactly the variables create applied.
	f.record(t, "")
	if err := f.p.Start(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	if got := f.applied(t); !reflect.DeepEqual(got, created) {
		t.Fatalf("start applied\n%+v\nwant\n%+v", got, created)
	}
	if got := f.lastVars(t); !reflect.DeepEqual(got, afterCreate) {
		t.Errorf("variables after stop and start differ from create's:\n%+v\nwant\n%+v", got, afterCreate)
	}
	if got := f.p.Env.Progress.(*titleLog).titles; !slices.Contains(got, "Starting the bridge and the API load balancer and the image registry") {
		t.Errorf("start's progress lines %q do not name the image registry", got)
	}

	// Killed at each apply of a stop, then of a start: run again, each
	// converges to the variables of an uninterrupted run.
	for _, run := range []struct {
		name  string
		do    func(context.Context, *platforms.Cluster) error
		steps int
		want  map[string]tfdata.LocalVars
	}{
		{"stop", f.p.Stop, len(wantStop), stopped},
		{"start", f.p.Start, len(created), afterCreate},
	} {
		for at := 1; at <= run.steps; at++ {
			f.record(t, strconv.Itoa(at))
			if err := run.do(ctx, f.c); err == nil {
				t.Fatalf("%s killed at apply %d succeeded", run.name, at)
			}
			if got := len(f.applied(t)); got != at {
				t.Fatalf("%s killed at apply %d ran %d applies", run.name, at, got)
			}
			f.record(t, "")
			if err := run.do(ctx, f.c); err != nil {
				t.Fatalf("%s after a kill at apply %d: %v", run.name, at, err)
			}
			if got := f.lastVars(t); !reflect.DeepEqual(got, run.want) {
				t.Errorf("%s after a kill at apply %d ends with\n%+v\nwant\n%+v", run.name, at, got, run.want)
			}
		}
	}

	// Start looks the registry's binary up again: a new one (kiln's cache
	// cleaned, a newer kiln) replaces the one create applied.
	f.p.EnsureRegistry = func(context.Context, nodeimage.Options) (string, error) {
		return "/cache/components/registry-2/bin/registry", nil
	}
	f.record(t, "")
	if err := f.p.Start(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	if v := f.lastVars(t)[terraform.StageNetwork]; v.Registry == nil || v.Registry.Binary != "/cache/components/registry-2/bin/registry" {
		t.Errorf("registry after a start with a new binary: %+v", v.Registry)
	}

	// Every apply ran on the whole stage, refreshed, with its variables:
	// no -target, no -refresh=false.
	applies := 0
	for _, in := range terraformtest.Invocations(os.Getenv(terraformtest.LogEnv)) {
		if !strings.HasPrefix(in.Args, "apply ") {
			continue
		}
		applies++
		fields := strings.Fields(in.Args)
		if len(fields) < 5 {
			t.Errorf("apply argv %q", in.Args)
			continue
		}
		stage := filepath.Base(filepath.Dir(strings.TrimPrefix(fields[4], "-var-file=")))
		want := "apply -no-color -auto-approve -input=false -var-file=" +
			filepath.Join(f.c.Dir, ".kiln/terraform", stage, "kiln.tfvars.json") + " -lock=true -parallelism=10 -refresh=true"
		if in.Args != want {
			t.Errorf("apply argv\n%q\nwant\n%q", in.Args, want)
		}
	}
	if applies == 0 {
		t.Error("no apply recorded")
	}
}

// routeStagesFrom returns the stages of the variables of each stage.
func routeStagesFrom(vars map[string]tfdata.LocalVars) stages {
	boot, cluster := vars[terraform.StageBootstrap], vars[terraform.StageCluster]
	return stages{network: vars[terraform.StageNetwork], bootstrap: &boot, cluster: &cluster}
}
