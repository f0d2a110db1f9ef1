package terraform

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/terraform/terraformtest"
)

func TestCheckVersion(t *testing.T) {
	tests := []struct {
		name, version string
		ok            bool
	}{
		{OpenTofu, "1.6.0", true},
		{OpenTofu, "1.12.6", true},
		{OpenTofu, "1.5.7", false},
		{OpenTofu, "2.0.0", true},
		{Terraform, "1.5.0", true},
		{Terraform, "1.11.4", true},
		{Terraform, "1.4.9", false},
		{Terraform, "0.15.5", false},
		{Terraform, "1.6.0-beta1", false},
		{Terraform, "1.6", false},
		{"pulumi", "3.0.0", false},
	}
	for _, tt := range tests {
		err := checkVersion(tt.name, tt.version)
		if (err == nil) != tt.ok {
			t.Errorf("checkVersion(%s, %s) = %v, want ok=%v", tt.name, tt.version, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrVersion) {
			t.Errorf("checkVersion(%s, %s) = %v, not ErrVersion", tt.name, tt.version, err)
		}
	}
}

func TestParseVersionOutput(t *testing.T) {
	tests := []struct {
		out, want string
		ok        bool
	}{
		{`{"terraform_version":"1.11.4","platform":"linux_amd64"}`, "1.11.4", true},
		{`{"terraform_version":"v1.12.6"}`, "1.12.6", true},
		{`{"platform":"linux_amd64"}`, "", false},
		{`Terraform v1.11.4`, "", false},
	}
	for _, tt := range tests {
		got, err := parseVersionOutput([]byte(tt.out))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("parseVersionOutput(%s) = %q, %v; want %q ok=%v", tt.out, got, err, tt.want, tt.ok)
		}
	}
}

func TestEnsureEngine(t *testing.T) {
	bin := t.TempDir()
	oldTofu := terraformtest.Engine(t, bin, "tofu", "1.5.0")
	tf := terraformtest.Engine(t, bin, "terraform", "1.11.4")
	cache := t.TempDir()
	tests := []struct {
		name     string
		onPath   map[string]string
		cached   string // version of a tofu in the cache, "" for none
		wantPath string
		wantErr  bool
	}{
		{"terraform on PATH, old tofu skipped", map[string]string{"tofu": oldTofu, "terraform": tf}, "", tf, false},
		{"cached build when PATH has nothing", map[string]string{}, "1.12.6", filepath.Join(cache, "engines", "tofu-v1.12.6", "tofu"), false},
		{"no engine, no go", map[string]string{}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(cache, "engines"))
			if tt.cached != "" {
				d := filepath.Join(cache, "engines", "tofu-v"+tt.cached)
				os.MkdirAll(d, 0o755)
				terraformtest.Engine(t, d, "tofu", tt.cached)
			}
			log, _ := test.NewNullLogger()
			e, err := EnsureEngine(context.Background(), BuildOptions{
				CacheDir: cache,
				LookPath: func(n string) (string, error) {
					if p, ok := tt.onPath[n]; ok {
						return p, nil
					}
					return "", errors.New("not found")
				},
				Log:      log,
				Progress: platforms.NoProgress{},
			})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("EnsureEngine = %v, want error", e)
				}
				return
			}
			if err != nil || e.Path != tt.wantPath {
				t.Fatalf("EnsureEngine = %v, %v; want %s", e, err, tt.wantPath)
			}
		})
	}
}

func TestBuildCommands(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "GOFLAGS=-mod=vendor", "HOME=/root", "CGO_ENABLED=1"}
	for _, s := range engineBuilds {
		out := "/cache/engines/" + s.Name + "-v" + s.Version + "/.kiln-tmp-" + s.Name + "-1"
		cmds := buildCommands(context.Background(), s, "/usr/local/go/bin/go", "/cache", out, environ)
		src := "/cache/engines/" + s.Name + "-v" + s.Version + "/src"
		want := [][]string{
			{"/usr/local/go/bin/go", "get", s.Package + "@v" + s.Version},
			{"/usr/local/go/bin/go", "build", "-trimpath", "-ldflags=" + s.LDFlags, "-o", out, s.Package},
		}
		if len(cmds) != len(want) {
			t.Fatalf("%s: %d commands, want %d", s.Name, len(cmds), len(want))
		}
		for i, c := range cmds {
			if strings.Join(c.Args, " ") != strings.Join(want[i], " ") {
				t.Errorf("%s command %d:\n got %q\nwant %q", s.Name, i, c.Args, want[i])
			}
			if c.Dir != src {
				t.Errorf("%s command %d dir = %s, want %s", s.Name, i, c.Dir, src)
			}
			env := strings.Join(c.Env, " ")
			for _, w := range []string{"GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0", "PATH=/usr/bin", "HOME=/root"} {
				if !strings.Contains(" "+env+" ", " "+w+" ") {
					t.Errorf("%s command %d env lacks %s: %s", s.Name, i, w, env)
				}
			}
			for _, bad := range []string{"GOFLAGS=-mod=vendor", "CGO_ENABLED=1"} {
				if strings.Contains(env, bad) {
					t.Errorf("%s command %d env keeps %s", s.Name, i, bad)
				}
			}
		}
		if !strings.Contains(s.GoMod, "module kiln.dev/enginebuild") {
			t.Errorf("%s wrapper go.mod has no module line", s.Name)
		}
	}
}

func TestLineLogger(t *testing.T) {
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	ll := newLineLogger(log, "tofu: ")
	ll.Write([]byte("one\ntw"))
	ll.Write([]byte("o\r\nthree"))
	ll.Close()
	var got []string
	for _, e := range hook.AllEntries() {
		if e.Level != logrus.DebugLevel {
			t.Errorf("level %s, want debug", e.Level)
		}
		got = append(got, e.Message)
	}
	want := "tofu: one|tofu: two|tofu: three"
	if strings.Join(got, "|") != want {
		t.Errorf("lines = %q, want %q", strings.Join(got, "|"), want)
	}
	if ll.Last() != "three" {
		t.Errorf("Last = %q", ll.Last())
	}
}
