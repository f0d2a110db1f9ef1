package lb

import (
	"slices"
	"testing"
)

// TestUnit: each daemon of each cluster gets its own unit name, made of
// characters systemd accepts.
func TestUnit(t *testing.T) {
	tests := []struct {
		p    Process
		want string
	}{
		{ProcessIn("/usr/local/bin/kiln", "/var/lib/kiln/lb/demo-x7k2p"), "kiln-lb-demo-x7k2p.service"},
		{Process{Subcommand: []string{"service-lb"}, ConfigPath: "/var/lib/kiln/lb/demo-x7k2p/service-lb.json"}, "kiln-service-lb-demo-x7k2p.service"},
		{Process{Subcommand: []string{"registry", "serve"}, ConfigPath: "/d/a b@c/r.json"}, "kiln-registry-serve-a_b_c.service"},
		{registryLike("/var/lib/kiln/lb/demo-x7k2p"), "kiln-registry-demo-x7k2p.service"},
	}
	for _, tt := range tests {
		if got := tt.p.Unit(); got != tt.want {
			t.Errorf("Unit(%v) = %q, want %q", tt.p.subcommand(), got, tt.want)
		}
	}
}

// registryLike is a daemon that is not a kiln subcommand but names its role,
// as the registry does.
func registryLike(dir string) Process {
	return Process{Kiln: "/cache/registry", Subcommand: []string{"serve"}, Role: "registry", ConfigPath: dir + "/registry.yml"}
}

// TestSystemdRunArgv: on a systemd host a daemon is a transient unit of its
// own, started once exec succeeded, logging to its log file, collected
// however it ends, with only the environment it is given.
func TestSystemdRunArgv(t *testing.T) {
	p := Process{
		Kiln: "/usr/local/bin/kiln", Subcommand: []string{"service-lb"},
		ConfigPath: "/var/lib/kiln/lb/demo-x7k2p/service-lb.json",
		PIDFile:    "/var/lib/kiln/lb/demo-x7k2p/service-lb.pid",
		LogFile:    "/var/lib/kiln/lb/demo-x7k2p/service-lb.log",
		Env:        []string{"A=1"},
	}
	want := []string{"systemd-run",
		"--unit=kiln-service-lb-demo-x7k2p.service",
		"--description=kiln service-lb /var/lib/kiln/lb/demo-x7k2p",
		"--collect", "--quiet",
		"--working-directory=/var/lib/kiln/lb/demo-x7k2p",
		"--property=Type=exec",
		"--property=StandardOutput=append:/var/lib/kiln/lb/demo-x7k2p/service-lb.log",
		"--property=StandardError=append:/var/lib/kiln/lb/demo-x7k2p/service-lb.log",
		"--setenv=A=1",
		"--",
		"/usr/local/bin/kiln", "--dir", "/var/lib/kiln/lb/demo-x7k2p", "service-lb",
		"--config", "/var/lib/kiln/lb/demo-x7k2p/service-lb.json", "--pid-file", "/var/lib/kiln/lb/demo-x7k2p/service-lb.pid",
	}
	if got := p.systemdRunArgv(); !slices.Equal(got, want) {
		t.Errorf("systemdRunArgv =\n%q\nwant\n%q", got, want)
	}
}
