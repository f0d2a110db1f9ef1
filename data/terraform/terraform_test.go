package terraform_test

import (
	"context"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms/local/provider"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	sshprovider "github.com/kiln-project/kiln/platforms/ssh/provider"
	"github.com/kiln-project/kiln/platforms/ssh/remote"
	tf "github.com/kiln-project/kiln/platforms/terraform"
	"github.com/kiln-project/kiln/platforms/terraform/enginetest"
)

// TestMain lets the test binary serve the kilnlocal or kilnssh provider
// when the engine starts it during TestValidate.
func TestMain(m *testing.M) {
	switch os.Getenv("KILN_TEST_SERVE_PROVIDER") {
	case "1":
		factory := func(provider.Settings) (*provider.Backend, error) {
			return nil, os.ErrInvalid // validation never configures the provider
		}
		if err := provider.Serve(context.Background(), factory); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "ssh":
		factory := func(remote.Config) (footprint.Host, error) {
			return nil, os.ErrInvalid // validation never configures the provider
		}
		if err := sshprovider.Serve(context.Background(), factory); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var stages = []string{tf.StageNetwork, tf.StageBootstrap, tf.StageCluster}

func TestStages(t *testing.T) {
	local, err := tfdata.Platform("local")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stages {
		if _, err := fs.Stat(local, s+"/main.tf"); err != nil {
			t.Errorf("stage %s: %v", s, err)
		}
	}
	if _, err := tfdata.Platform("aws"); err == nil {
		t.Errorf("Platform(aws) succeeded without modules")
	}
}

// TestVarsMatchVariables keeps LocalVars and SSHVars and their
// platform's variables.tf in step: every variable has a field and every
// field a variable.
func TestVarsMatchVariables(t *testing.T) {
	for platform, vars := range map[string]any{"local": tfdata.LocalVars{}, "ssh": tfdata.SSHVars{}} {
		t.Run(platform, func(t *testing.T) { varsMatch(t, platform, vars) })
	}
}

func varsMatch(t *testing.T, platform string, vars any) {
	modules, err := tfdata.Platform(platform)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(modules, "variables.tf")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^variable "([a-z0-9_]+)"`).FindAllStringSubmatch(string(data), -1) {
		declared = append(declared, m[1])
	}
	var fields []string
	rt := reflect.TypeOf(vars)
	for i := range rt.NumField() {
		fields = append(fields, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	sort.Strings(declared)
	sort.Strings(fields)
	if !reflect.DeepEqual(declared, fields) {
		t.Errorf("variables.tf declares %v\nLocalVars has %v", declared, fields)
	}
}

// sampleVars is a valid set of variables for every stage.
func sampleVars() tfdata.LocalVars {
	return tfdata.LocalVars{
		ClusterName: "demo", BaseDomain: "example.test", InfraID: "demo-x7k2p",
		Bridge: "kiln-demo", MachineCIDR: "10.66.0.0/24", APIVIP: "10.66.0.1",
		NodeImage: "/var/lib/kiln/images/node", KilnBinary: "/usr/local/bin/kiln",
		BootstrapIgnition: "{}", MasterIgnition: "{}", WorkerIgnition: "{}",
		BootstrapAddress: "10.66.0.10", BootstrapInLB: true,
		MasterNames: []string{"demo-x7k2p-master-0"}, MasterAddresses: []string{"10.66.0.11"},
		WorkerNames: []string{"demo-x7k2p-worker-0", "demo-x7k2p-worker-1"}, WorkerAddresses: []string{"10.66.0.21", "10.66.0.22"},
		MasterCPUs: 2, MasterMemoryMiB: 4096,
	}
}

// TestValidate runs `validate` of every stage of each platform with a real
// engine (tofu or terraform on PATH) and the platform's provider served by
// this test binary.
func TestValidate(t *testing.T) {
	engine := enginetest.Find(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := enginetest.Log(t)
	for _, p := range []struct {
		platform, source, version, serve string
		stages                           []string
		vars                             any
	}{
		{"local", provider.Source, provider.Version, "1", stages, sampleVars()},
		{"ssh", sshprovider.Source, sshprovider.Version, "ssh", []string{tf.StageBootstrap, tf.StageCluster}, sampleSSHVars()},
	} {
		modules, _ := tfdata.Platform(p.platform)
		d := tf.NewDriver(tf.DriverOptions{
			Engine:  engine,
			Dir:     t.TempDir(),
			Modules: modules,
			Providers: []tf.Provider{{Source: p.source, Version: p.version,
				Command: []string{self}, Env: map[string]string{"KILN_TEST_SERVE_PROVIDER": p.serve}}},
			Log: log,
		})
		for _, s := range p.stages {
			if err := d.Validate(context.Background(), s, p.vars); err != nil {
				t.Errorf("%s stage %s: %v", p.platform, s, err)
			}
		}
	}
}

// sampleSSHVars is a valid set of variables for every stage of the ssh
// platform.
func sampleSSHVars() tfdata.SSHVars {
	return tfdata.SSHVars{
		SSHUser: "root", SSHKnownHostsFile: "/root/.ssh/known_hosts", Payload: "/var/cache/kiln/payload/kiln-v1.36.3",
		Bootstrap:         &tfdata.SSHHost{Name: "boot", Address: "10.0.0.10", IP: "10.0.0.10"},
		Masters:           []tfdata.SSHHost{{Name: "m0", Address: "m0.example.test", IP: "10.0.0.11"}},
		Workers:           []tfdata.SSHHost{{Name: "w0", Address: "10.0.0.21", IP: "10.0.0.21"}},
		BootstrapIgnition: "{}", MasterIgnition: "{}", WorkerIgnition: "{}",
	}
}
