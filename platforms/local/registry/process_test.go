package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProcessArgv checks the command line kiln runs the registry with.
func TestProcessArgv(t *testing.T) {
	got := Process("/cache/registry", "/var/lib/kiln/lb/c-x").Command()
	want := []string{"/cache/registry", "--dir", "/var/lib/kiln/lb/c-x", "serve",
		"--config", "/var/lib/kiln/lb/c-x/registry.yml", "--pid-file", "/var/lib/kiln/lb/c-x/registry.pid"}
	if !slices.Equal(got, want) {
		t.Errorf("argv = %q, want %q", got, want)
	}
}

// A registry that exits before it listens is a *StartError whose reason
// is its log's last line, however long the log.
func TestStartError(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "registry")
	script := "#!/bin/sh\nfor i in $(seq 300); do echo 'level=info msg=\"response completed\"'; done\n" +
		"echo 'registry: listen tcp 127.0.0.1:5001: bind: address already in use' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Start(ctx, Process(bin, dir), 5001)
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("Start = %v, want a *StartError", err)
	}
	want := StartError{Reason: "registry: listen tcp 127.0.0.1:5001: bind: address already in use", Log: filepath.Join(dir, logFile), Port: 5001}
	if *se != want {
		t.Errorf("StartError = %+v, want %+v", *se, want)
	}
	if !strings.Contains(se.Error(), "platform.local.registryPort") {
		t.Errorf("the error does not say what to do: %v", se)
	}
	if got := lastLogLine(filepath.Join(dir, "none")); got != "" {
		t.Errorf("lastLogLine of a missing file = %q", got)
	}
}

// Remove takes the registry's files and storage and leaves the directory
// and the other files in it (the API load balancer's).
func TestRemove(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, pidFile, logFile, "lb.json", filepath.Join(StorageDir, "docker", "blob")} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "lb.json" {
		t.Errorf("left after Remove: %v, want lb.json alone", entries)
	}
	if err := Remove(dir); err != nil {
		t.Errorf("Remove of nothing: %v", err)
	}
}
