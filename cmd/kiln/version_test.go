package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

func TestReadVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/kiln-project/kiln", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-11-25T02:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	v := readVersion(bi, true)
	if v.Kiln != "v1.2.3" || v.Commit != "0123456789abcdef" || v.CommitTime != "2026-11-25T02:00:00Z" || !v.Modified || v.Go != "go1.99.1" {
		t.Errorf("readVersion = %+v", v)
	}
	if v.Release.Kubernetes != release.Default().Kubernetes || v.Release.Etcd != release.Default().Etcd || v.Release.CoreDNS != release.Default().CoreDNS {
		t.Errorf("release = %+v, want the pinned versions", v.Release)
	}
	var out bytes.Buffer
	if err := v.write(&out, "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kiln v1.2.3\n", "commit: 0123456789abcdef (2026-11-25T02:00:00Z, with uncommitted changes)\n",
		"built with: go1.99.1 ", "kubernetes              " + release.Default().Kubernetes + "\n", "metrics-server          " + release.MetricsServerVersion, "kube-router             " + release.KubeRouterVersion + "\n",
		"registry (host)         " + release.RegistryVersion + "\n",
		"releases (install-config kubernetesVersion; the first is the default):\n  v1.36.3  etcd v3.6.16, coredns v1.15.0\n  v1.36.1  etcd v3.6.16, coredns v1.15.0\n  v1.35.4  etcd v3.5.35, coredns v1.15.0\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
	// A binary without VCS stamps (built outside a checkout) says so by
	// leaving the commit out.
	if v := readVersion(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true); v.Commit != "" || v.Kiln != "(devel)" {
		t.Errorf("unstamped build = %+v", v)
	}
	if v := readVersion(nil, false); v.Kiln != "(devel)" || v.Release.Kubernetes == "" {
		t.Errorf("no build info = %+v", v)
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	o := &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
	if code := execute(context.Background(), o, []string{"version", "--output", "json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--output json is not JSON: %v\n%s", err, out.String())
	}
	if v.Kiln == "" || v.Go == "" || v.Release.Kubernetes != release.Default().Kubernetes || v.Release.Containerd != release.ContainerdVersion || v.Release.Runc != release.RuncVersion {
		t.Errorf("version = %+v", v)
	}
	out.Reset()
	errOut.Reset()
	o = &rootOptions{stdin: bytes.NewReader(nil), stdout: &out, stderr: &errOut}
	if code := execute(context.Background(), o, []string{"version", "-o", "yaml"}); code != 2 || !strings.Contains(errOut.String(), `--output "yaml"`) {
		t.Errorf("version -o yaml: exit %d, %q; want 2 naming the flag", code, errOut.String())
	}
}
