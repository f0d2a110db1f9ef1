package terraform

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms/terraform/terraformtest"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestCLIConfigGolden(t *testing.T) {
	golden(t, "kiln.tfrc", cliConfig("/cluster/.kiln/terraform/providers"))
}

func TestProviderScript(t *testing.T) {
	p := Provider{
		Source:  "kiln.dev/kiln/kilnlocal",
		Version: "0.1.0",
		Command: []string{"/opt/it's kiln/kiln", "terraform-provider-kilnlocal"},
		Env:     map[string]string{"B": "2", "A": "1"},
	}
	golden(t, "provider.sh", providerScript(p))
}

func TestWriteCLIConfig(t *testing.T) {
	dir := t.TempDir()
	mirror := filepath.Join(dir, "providers")
	out := filepath.Join(dir, "argv")
	p := Provider{
		Source:  "kiln.dev/kiln/kilnlocal",
		Version: "0.1.0",
		Command: []string{"/bin/sh", "-c", `echo "$KILN_X $*" > "$0"`, out},
		Env:     map[string]string{"KILN_X": "served"},
	}
	cfg := filepath.Join(dir, "kiln.tfrc")
	if err := WriteCLIConfig(&atomicfile.Writer{}, cfg, mirror, []Provider{p}); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(mirror, "kiln.dev/kiln/kilnlocal/0.1.0", runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-kilnlocal")
	st, err := os.Stat(exe)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("provider executable: %v, %v", st, err)
	}
	// The engine starts the provider with no arguments; the script must
	// exec the command with its environment.
	if err := exec.Command(exe, "extra").Run(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if strings.TrimSpace(string(got)) != "served extra" {
		t.Errorf("provider script ran %q, want %q", got, "served extra")
	}
	data, _ := os.ReadFile(cfg)
	if !bytes.Equal(data, cliConfig(mirror)) {
		t.Errorf("CLI config content differs from cliConfig()")
	}
	for _, bad := range []Provider{
		{Source: "registry.terraform.io/hashicorp/local", Version: "0.1.0"},
		{Source: "kiln.dev/local", Version: "0.1.0"},
		{Source: "kiln.dev/kiln/local", Version: "dev"},
	} {
		if err := WriteCLIConfig(&atomicfile.Writer{}, cfg, mirror, []Provider{bad}); err == nil {
			t.Errorf("WriteCLIConfig(%s %s) succeeded", bad.Source, bad.Version)
		}
	}
}

func TestEngineEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/root", "TF_CLI_CONFIG_FILE=/root/.terraformrc",
		"TF_PLUGIN_CACHE_DIR=/root/.tf-cache", "TF_VAR_x=1", "TF_CLI_ARGS=-no-color",
		"TF_LOG=trace", "TOFU_CLI_CONFIG_FILE=/x", "CHECKPOINT_DISABLE=", "TF_DATA_DIR=/tmp/d",
	}
	got := engineEnv(environ, "/c/kiln.tfrc")
	want := map[string]string{
		"PATH": "/usr/bin", "HOME": "/root", "CHECKPOINT_DISABLE": "1",
		"TF_CLI_CONFIG_FILE": "/c/kiln.tfrc", "TOFU_CLI_CONFIG_FILE": "/c/kiln.tfrc",
	}
	if len(got) != len(want) {
		t.Errorf("engineEnv = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("engineEnv[%s] = %q, want %q", k, got[k], v)
		}
	}
	list := engineEnvList(environ, "")
	if strings.Join(list, " ") != "CHECKPOINT_DISABLE=1 HOME=/root PATH=/usr/bin TF_IN_AUTOMATION=1" {
		t.Errorf("engineEnvList = %q", list)
	}
}

func TestDriverApplyDestroy(t *testing.T) {
	bin := t.TempDir()
	engine := &Engine{Name: OpenTofu, Path: terraformtest.Engine(t, bin, "tofu", "1.12.6"), Version: "1.12.6"}
	logFile := filepath.Join(t.TempDir(), "invocations")
	t.Setenv(terraformtest.LogEnv, logFile)
	t.Setenv("TF_CLI_CONFIG_FILE", "/root/.terraformrc")
	t.Setenv("TF_PLUGIN_CACHE_DIR", "/root/.terraform.d/plugin-cache")
	t.Setenv("TF_VAR_cluster_name", "users")

	dir := t.TempDir()
	modules := fstest.MapFS{
		"variables.tf":         {Data: []byte(`variable "cluster_name" {}`)},
		"network/main.tf":      {Data: []byte(`# network`)},
		"network/README":       {Data: []byte(`not copied`)},
		"bootstrap/main.tf":    {Data: []byte(`# bootstrap`)},
		"bootstrap/outputs.tf": {Data: []byte(`# outputs`)},
	}
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	d := NewDriver(DriverOptions{
		Engine:  engine,
		Dir:     dir,
		Modules: modules,
		Providers: []Provider{{Source: "kiln.dev/kiln/kilnlocal", Version: "0.1.0",
			Command: []string{"/usr/local/bin/kiln", "terraform-provider-kilnlocal"}}},
		Log: log,
	})
	ctx := context.Background()

	var last map[string]any
	if err := d.LastVars(StageBootstrap, &last); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LastVars of a stage never applied: %v", err)
	}
	// Destroying a stage never applied runs nothing.
	if err := d.Destroy(ctx, StageBootstrap, nil); err != nil {
		t.Fatal(err)
	}
	if inv := terraformtest.Invocations(logFile); len(inv) != 0 {
		t.Fatalf("destroy without state ran %d commands", len(inv))
	}

	vars := map[string]any{"cluster_name": "c1", "bootstrap_ignition": "secret"}
	if err := d.Apply(ctx, StageBootstrap, vars); err != nil {
		t.Fatal(err)
	}
	if err := d.LastVars(StageBootstrap, &last); err != nil || last["cluster_name"] != "c1" || last["bootstrap_ignition"] != "secret" {
		t.Fatalf("LastVars = %v, %v; want the applied variables", last, err)
	}
	stageDir := filepath.Join(dir, ".kiln/terraform/bootstrap")
	for _, f := range []string{"main.tf", "outputs.tf", "variables.tf"} {
		if _, err := os.Stat(filepath.Join(stageDir, f)); err != nil {
			t.Errorf("stage file %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(stageDir, "README")); err == nil {
		t.Errorf("non-.tf file copied into the stage")
	}
	st, err := os.Stat(filepath.Join(stageDir, varFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("tfvars file: %v %v, want mode 0600", st, err)
	}
	if err := d.Destroy(ctx, StageBootstrap, vars); err != nil {
		t.Fatal(err)
	}

	inv := terraformtest.Invocations(logFile)
	varFile := filepath.Join(stageDir, varFileName)
	initArgs := "init -no-color -input=false -backend=true -get=true -upgrade=false"
	wantArgs := []string{
		initArgs,
		"apply -no-color -auto-approve -input=false",
		initArgs,
		"destroy -no-color -auto-approve -input=false",
	}
	if len(inv) != len(wantArgs) {
		t.Fatalf("%d engine runs, want %d: %+v", len(inv), len(wantArgs), inv)
	}
	cfg := filepath.Join(dir, ".kiln/terraform/kiln.tfrc")
	for i, in := range inv {
		if !strings.HasPrefix(in.Args, wantArgs[i]) {
			t.Errorf("run %d: args %q, want prefix %q", i, in.Args, wantArgs[i])
		}
		if hasVarFile := strings.Contains(in.Args+" ", " -var-file="+varFile+" "); hasVarFile != (i%2 == 1) {
			t.Errorf("run %d: args %q: -var-file=%s present=%v", i, in.Args, varFile, hasVarFile)
		}
		for k, v := range map[string]string{"TF_CLI_CONFIG_FILE": cfg, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"} {
			if in.Env[k] != v {
				t.Errorf("run %d: %s=%q, want %q", i, k, in.Env[k], v)
			}
		}
		for _, k := range []string{"TF_PLUGIN_CACHE_DIR", "TF_VAR_cluster_name"} {
			if _, ok := in.Env[k]; ok {
				t.Errorf("run %d: user's %s reached the engine", i, k)
			}
		}
	}
	if _, err := os.Stat(cfg); err != nil {
		t.Errorf("CLI config not written: %v", err)
	}
	found := false
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "fake apply done") && e.Level == logrus.DebugLevel {
			found = true
		}
		if strings.Contains(e.Message, "secret") {
			t.Errorf("a variable value reached the log: %q", e.Message)
		}
	}
	if !found {
		t.Errorf("engine output was not logged at debug level")
	}
}

func TestDriverApplyError(t *testing.T) {
	bin := t.TempDir()
	engine := &Engine{Name: OpenTofu, Path: terraformtest.Engine(t, bin, "tofu", "1.12.6"), Version: "1.12.6"}
	t.Setenv(terraformtest.LogEnv, filepath.Join(t.TempDir(), "invocations"))
	t.Setenv(terraformtest.FailEnv, "1")
	log, _ := test.NewNullLogger()
	d := NewDriver(DriverOptions{Engine: engine, Dir: t.TempDir(), Log: log,
		Modules: fstest.MapFS{"network/main.tf": {Data: []byte("# network")}}})
	err := d.Apply(context.Background(), StageNetwork, map[string]any{})
	if err == nil {
		t.Fatal("Apply succeeded with a failing engine")
	}
	if !strings.Contains(err.Error(), "tofu apply of stage network") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Apply error %q lacks the stage or the engine's message", err)
	}
	if err := d.Apply(context.Background(), "nosuchstage", nil); err == nil {
		t.Errorf("Apply of a stage without modules succeeded")
	}
}

// TestDriverRefusesSymlinks plants a link to a directory outside --dir
// where the driver writes (the work directory, a stage directory) or where
// the engine itself writes (state, .terraform): Apply fails with an
// *atomicfile.SymlinkError naming the link before the engine runs, and
// nothing outside --dir changes.
func TestDriverRefusesSymlinks(t *testing.T) {
	for _, link := range []string{
		".kiln", ".kiln/terraform", ".kiln/terraform/network",
		".kiln/terraform/providers", ".kiln/terraform/kiln.tfrc",
		".kiln/terraform/network/" + stateFileName, ".kiln/terraform/network/.terraform",
		".kiln/terraform/network/" + varFileName,
	} {
		t.Run(link, func(t *testing.T) {
			bin := t.TempDir()
			engine := &Engine{Name: OpenTofu, Path: terraformtest.Engine(t, bin, "tofu", "1.12.6"), Version: "1.12.6"}
			logFile := filepath.Join(t.TempDir(), "invocations")
			t.Setenv(terraformtest.LogEnv, logFile)
			dir, outside := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "precious"), []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			linkPath := filepath.Join(dir, filepath.FromSlash(link))
			if err := os.MkdirAll(filepath.Dir(linkPath), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, linkPath); err != nil {
				t.Fatal(err)
			}
			log, _ := test.NewNullLogger()
			d := NewDriver(DriverOptions{Engine: engine, Dir: dir, Log: log,
				Modules: fstest.MapFS{"network/main.tf": {Data: []byte("# network")}},
				Providers: []Provider{{Source: "kiln.dev/kiln/kilnlocal", Version: "0.1.0",
					Command: []string{"/usr/local/bin/kiln", "terraform-provider-kilnlocal"}}}})
			err := d.Apply(context.Background(), StageNetwork, map[string]any{})
			var se *atomicfile.SymlinkError
			if !errors.As(err, &se) || se.Path != linkPath {
				t.Fatalf("Apply = %v; want an *atomicfile.SymlinkError for %s", err, linkPath)
			}
			entries, err := os.ReadDir(outside)
			if err != nil || len(entries) != 1 {
				t.Errorf("the driver wrote outside --dir: %v %v", entries, err)
			}
			if data, _ := os.ReadFile(filepath.Join(outside, "precious")); string(data) != "precious" {
				t.Errorf("precious = %q", data)
			}
			if inv := terraformtest.Invocations(logFile); len(inv) != 0 {
				t.Errorf("the engine ran %d times", len(inv))
			}
		})
	}
}

// TestInstances reads the managed instances of a stage's state file: their
// address, name, schema version and attributes; data sources are left out,
// and a stage never applied has none.
func TestInstances(t *testing.T) {
	dir := t.TempDir()
	d := NewDriver(DriverOptions{Dir: dir})
	if in, err := d.Instances(StageCluster); err != nil || len(in) != 0 {
		t.Fatalf("Instances of a stage never applied = %v, %v", in, err)
	}
	state := `{"version":4,"resources":[
 {"mode":"managed","type":"kilnlocal_machine","name":"master","instances":[
  {"index_key":"c-master-0","schema_version":1,"attributes":{"name":"c-master-0","state":"stopped"}},
  {"index_key":1,"schema_version":0,"attributes":{"name":"c-master-1","running":true}}]},
 {"mode":"data","type":"kilnlocal_image","name":"node","instances":[{"attributes":{"name":"node"}}]}]}`
	if err := os.MkdirAll(d.StageDir(StageCluster), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.StageDir(StageCluster), stateFileName), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := d.Instances(StageCluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []Instance{
		{Resource: "kilnlocal_machine.master", Key: "c-master-0", Name: "c-master-0", SchemaVersion: 1,
			Attributes: map[string]any{"name": "c-master-0", "state": "stopped"}},
		{Resource: "kilnlocal_machine.master", Key: float64(1), Name: "c-master-1",
			Attributes: map[string]any{"name": "c-master-1", "running": true}},
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("Instances =\n%+v\nwant\n%+v", in, want)
	}
	if got := []string{in[0].Address(), in[1].Address()}; !slices.Equal(got, []string{`kilnlocal_machine.master["c-master-0"]`, "kilnlocal_machine.master[1]"}) {
		t.Errorf("addresses = %q", got)
	}
}
