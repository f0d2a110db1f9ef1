package kubectl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNew checks the argv and environment of a kubectl run: the
// arguments as given, KUBECONFIG replaced (never two of them), the rest of
// the environment kept and the caller's slice left alone.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name             string
		args, environ    []string
		wantArgv, wantEn []string
	}{
		{
			name:     "no arguments",
			environ:  []string{"PATH=/usr/bin"},
			wantArgv: []string{"/cache/kubectl"},
			wantEn:   []string{"PATH=/usr/bin", "KUBECONFIG=/d/auth/kubeconfig"},
		},
		{
			name:     "arguments and flags as given",
			args:     []string{"get", "nodes", "-o", "wide", "--kubeconfig=/other"},
			environ:  []string{"HOME=/root"},
			wantArgv: []string{"/cache/kubectl", "get", "nodes", "-o", "wide", "--kubeconfig=/other"},
			wantEn:   []string{"HOME=/root", "KUBECONFIG=/d/auth/kubeconfig"},
		},
		{
			name:     "the user's KUBECONFIG replaced",
			args:     []string{"version"},
			environ:  []string{"KUBECONFIG=/home/u/.kube/config:/x", "PATH=/bin", "KUBECONFIG="},
			wantArgv: []string{"/cache/kubectl", "version"},
			wantEn:   []string{"PATH=/bin", "KUBECONFIG=/d/auth/kubeconfig"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.environ)
			c := New("/cache/kubectl", "/d/auth/kubeconfig", tc.args, tc.environ)
			if c.Path != "/cache/kubectl" || !slices.Equal(c.Argv, tc.wantArgv) || !slices.Equal(c.Env, tc.wantEn) {
				t.Errorf("New = %+v, want argv %q env %q", c, tc.wantArgv, tc.wantEn)
			}
			if !slices.Equal(tc.environ, before) {
				t.Errorf("the caller's environment changed: %q", tc.environ)
			}
		})
	}
}

// TestWithinSkew is the skew policy: one minor version either way, same
// major.
func TestWithinSkew(t *testing.T) {
	for _, tc := range []struct {
		client, server string
		want           bool
	}{
		{"v1.36.3", "v1.36.3", true},
		{"v1.36.0", "v1.36.3", true},
		{"v1.35.9", "v1.36.3", true},
		{"v1.37.0", "v1.36.3", true},
		{"v1.34.2", "v1.36.3", false},
		{"v1.38.0-alpha.1", "v1.36.3", false},
		{"v1.32.4-dispatcher", "v1.36.3", false},
		{"v1.32.4-eks-1234", "v1.33.0", true},
		{"v2.36.0", "v1.36.3", false},
	} {
		got, err := WithinSkew(tc.client, tc.server)
		if err != nil || got != tc.want {
			t.Errorf("WithinSkew(%s, %s) = %v, %v; want %v", tc.client, tc.server, got, err, tc.want)
		}
	}
	for _, bad := range [][2]string{{"", "v1.36.3"}, {"v1.36.3", "latest"}} {
		if _, err := WithinSkew(bad[0], bad[1]); err == nil {
			t.Errorf("WithinSkew(%q, %q) accepted a version that does not parse", bad[0], bad[1])
		}
	}
}

func TestVersionArgv(t *testing.T) {
	want := []string{"/usr/bin/kubectl", "version", "--client", "--output", "json"}
	if got := versionArgv("/usr/bin/kubectl"); !slices.Equal(got, want) {
		t.Errorf("versionArgv = %q, want %q", got, want)
	}
}

// TestParseClientVersion reads a real kubectl's output (testdata).
func TestParseClientVersion(t *testing.T) {
	out, err := os.ReadFile(filepath.Join("testdata", "version-v1.32.4-dispatcher.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parseClientVersion(out); err != nil || got != "v1.32.4-dispatcher" {
		t.Errorf("parseClientVersion = %q, %v", got, err)
	}
	for _, bad := range []string{`{"kustomizeVersion":"v5.5.0"}`, `Client Version: v1.32.4`} {
		if _, err := parseClientVersion([]byte(bad)); err == nil {
			t.Errorf("parseClientVersion(%q) gave no error", bad)
		}
	}
}

// TestSkewNote runs fake kubectls that print a version: a note only for
// one outside the policy.
func TestSkewNote(t *testing.T) {
	dir := t.TempDir()
	fake := func(v string) string {
		p := filepath.Join(dir, "kubectl-"+v)
		script := "#!/bin/sh\necho '{\"clientVersion\":{\"gitVersion\":\"" + v + "\"}}'\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	found := func(p string) func(string) (string, error) {
		return func(string) (string, error) { return p, nil }
	}
	notFound := func(string) (string, error) { return "", errors.New("not found") }
	ctx := context.Background()
	if n := SkewNote(ctx, found(fake("v1.32.4-dispatcher")), "v1.36.3", "/d"); n == "" {
		t.Error("no note for kubectl v1.32 against v1.36")
	}
	if n := SkewNote(ctx, found(fake("v1.35.1")), "v1.36.3", "/d"); n != "" {
		t.Errorf("a note for kubectl v1.35 against v1.36: %s", n)
	}
	if n := SkewNote(ctx, notFound, "v1.36.3", "/d"); n != "" {
		t.Errorf("a note without a kubectl: %s", n)
	}
	if n := SkewNote(ctx, found(filepath.Join(dir, "missing")), "v1.36.3", "/d"); n != "" {
		t.Errorf("a note for a kubectl that does not run: %s", n)
	}
}
