// Package terraformtest is a fake Terraform engine for tests: a shell
// script that answers `version -json` and records every other command it
// runs, so tests check the argv, environment and variables kiln builds for
// the engine without running one.
package terraformtest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Environment variables the fake engine reads.
const (
	// LogEnv names the file each run appends "ARGS <args>" and one
	// "ENV <name>=<value>" line per variable of its environment to.
	LogEnv = "FAKE_ENGINE_LOG"
	// FailEnv, when set, makes every apply fail ("Error: boom").
	FailEnv = "FAKE_ENGINE_FAIL"
	// VarsDirEnv names a directory each apply copies its -var-file into,
	// as <n>-<stage>.json, n counting the applies from 1.
	VarsDirEnv = "FAKE_ENGINE_VARS"
	// FailAtEnv makes apply number n (as counted in VarsDirEnv) fail after
	// its variables were copied, as an apply killed half-way would.
	FailAtEnv = "FAKE_ENGINE_FAIL_AT"
)

// script is the fake engine. An apply writes an empty state, as a real
// engine leaves a state file behind.
const script = `#!/bin/sh
if [ "$1" = version ]; then
  echo '{"terraform_version":"%VERSION%","platform":"linux_amd64","provider_selections":{},"terraform_outdated":false}'
  exit 0
fi
if [ "$1" = apply ] && [ -n "$FAKE_ENGINE_FAIL" ]; then echo "Error: boom" >&2; exit 1; fi
echo "ARGS $*" >> "$FAKE_ENGINE_LOG"
env | sort | sed 's/^/ENV /' >> "$FAKE_ENGINE_LOG"
if [ "$1" = apply ] && [ -n "$FAKE_ENGINE_VARS" ]; then
  n=$(( $(ls "$FAKE_ENGINE_VARS" | wc -l) + 1 ))
  for a in "$@"; do
    case "$a" in -var-file=*) cp "${a#-var-file=}" "$FAKE_ENGINE_VARS/$(printf %03d "$n")-$(basename "$PWD").json" ;; esac
  done
  if [ "$n" = "$FAKE_ENGINE_FAIL_AT" ]; then echo "Error: killed" >&2; exit 1; fi
fi
if [ "$1" = apply ]; then echo '{}' > terraform.tfstate; fi
echo "fake $1 done"
`

// Engine writes the fake engine called name, reporting version, into dir
// and returns its path.
func Engine(t testing.TB, dir, name, version string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(script, "%VERSION%", version)), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Invocation is one run of the fake engine, as recorded in its log.
type Invocation struct {
	// Args are its arguments, joined by spaces.
	Args string
	// Env is its environment.
	Env map[string]string
}

// Invocations reads the runs recorded in the log at path; none when there
// is no log.
func Invocations(path string) []Invocation {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []Invocation
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "ARGS "):
			out = append(out, Invocation{Args: strings.TrimPrefix(line, "ARGS "), Env: map[string]string{}})
		case strings.HasPrefix(line, "ENV ") && len(out) > 0:
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "ENV "), "=")
			out[len(out)-1].Env[k] = v
		}
	}
	return out
}

// Apply is one apply's stage and the variables it was run with.
type Apply struct {
	// Stage is the name of the stage's directory.
	Stage string
	// Vars is the content of its -var-file.
	Vars []byte
}

// Applies returns the applies recorded in dir (VarsDirEnv), in order.
func Applies(t testing.TB, dir string) []Apply {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	out := make([]Apply, 0, len(names))
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		_, stage, _ := strings.Cut(strings.TrimSuffix(n, ".json"), "-")
		out = append(out, Apply{Stage: stage, Vars: data})
	}
	return out
}
