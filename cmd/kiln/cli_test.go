package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/installdir"
)

// kilnExe is the name under which the test binary runs kiln's main in a
// child process. It differs from "kiln" because testscript's own commands
// take precedence over Params.Cmds, and the script command kiln (below)
// must record the exit code.
const kilnExe = "kiln-under-test"

// TestMain lets the test binary run as kiln (as kilnExe) in scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		kilnExe: func() { os.Exit(run(os.Args[1:])) },
	})
}

// TestCLIScripts runs the testscript scripts in test/cli/*.txtar, with
// $KUBERNETES_VERSION the pinned Kubernetes release. Besides
// testscript's built-in commands (stdin, stdout, stderr, exists, cp, cmp,
// mkdir, ...), scripts have:
//
//	[!] kiln ARGS...         run kiln in $WORK (the default --dir); with !, expect a non-zero exit
//	code N                   the last kiln run exited with exactly N
//	mode PATH PERM           PATH has permission PERM (octal)
//	replace PATH OLD NEW     replace OLD by NEW in PATH (Go escapes such as \n allowed)
//	snapshot                 remember every file and link under $WORK (but testscript's $WORK/.tmp)
//	unchanged [-log]         $WORK is byte-for-byte, mode and mtime as at snapshot (-log: but .kiln.log)
//	declared DIR             every path under DIR is one that installdir.Layout declares
func TestCLIScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "..", "test", "cli"),
		Setup: func(env *testscript.Env) error {
			env.Values[scriptStateKey{}] = &scriptState{}
			env.Setenv("KUBERNETES_VERSION", release.Default().Kubernetes)
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"kiln":      cmdKiln,
			"code":      cmdCode,
			"mode":      cmdMode,
			"replace":   cmdReplace,
			"snapshot":  cmdSnapshot,
			"unchanged": cmdUnchanged,
			"declared":  cmdDeclared,
		},
	})
}

// scriptStateKey keys a script's *scriptState in its Env.Values.
type scriptStateKey struct{}

// scriptState is what one script's commands share.
type scriptState struct {
	code int               // exit code of the last kiln run
	ran  bool              // kiln has run
	snap map[string]string // files at the last snapshot
}

func state(ts *testscript.TestScript) *scriptState {
	return ts.Value(scriptStateKey{}).(*scriptState)
}

func cmdKiln(ts *testscript.TestScript, neg bool, args []string) {
	err := ts.Exec(kilnExe, args...)
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		ts.Fatalf("run kiln: %v", err)
	}
	st := state(ts)
	st.code, st.ran = code, true
	if (code != 0) != neg {
		ts.Fatalf("kiln exited with %d", code)
	}
}

func cmdCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: code N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	st := state(ts)
	if !st.ran {
		ts.Fatalf("code: kiln has not run")
	}
	if st.code != want {
		ts.Fatalf("kiln exited with %d, want %d", st.code, want)
	}
}

func cmdMode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mode PATH PERM")
	}
	want, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	info, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := info.Mode().Perm(); uint64(got) != want {
		ts.Fatalf("mode of %s is %04o, want %s", args[0], got, args[1])
	}
}

func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: replace PATH OLD NEW")
	}
	old, repl := unescape(ts, args[1]), unescape(ts, args[2])
	path := ts.MkAbs(args[0])
	data, err := os.ReadFile(path)
	ts.Check(err)
	if !strings.Contains(string(data), old) {
		ts.Fatalf("%s does not contain %q", args[0], old)
	}
	ts.Check(os.WriteFile(path, []byte(strings.ReplaceAll(string(data), old, repl)), 0o600))
}

// unescape interprets Go escape sequences in s; quotes in s are literal.
func unescape(ts *testscript.TestScript, s string) string {
	u, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	if err != nil {
		ts.Fatalf("bad escape in %q: %v", s, err)
	}
	return u
}

func cmdSnapshot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: snapshot")
	}
	state(ts).snap = snapshot(ts)
}

func cmdUnchanged(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 || (len(args) == 1 && args[0] != "-log") {
		ts.Fatalf("usage: unchanged [-log]")
	}
	before := state(ts).snap
	if before == nil {
		ts.Fatalf("unchanged: no snapshot")
	}
	before, now := maps.Clone(before), snapshot(ts)
	if len(args) == 1 {
		for _, m := range []map[string]string{before, now} {
			maps.DeleteFunc(m, func(k, _ string) bool { return filepath.Base(k) == installdir.DebugLog })
		}
	}
	var changed []string
	for _, m := range []map[string]string{before, now} {
		for k := range m {
			if before[k] != now[k] && !slices.Contains(changed, k) {
				changed = append(changed, k)
			}
		}
	}
	if len(changed) > 0 {
		slices.Sort(changed)
		ts.Fatalf("$WORK changed since snapshot: %s", strings.Join(changed, ", "))
	}
}

func cmdDeclared(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: declared DIR")
	}
	stray, err := installdir.Undeclared(ts.MkAbs(args[0]))
	ts.Check(err)
	if len(stray) > 0 {
		ts.Fatalf("%s holds paths that installdir.Layout does not declare: %s", args[0], strings.Join(stray, ", "))
	}
}

// snapshot maps every directory, file and symbolic link under $WORK, but
// testscript's temporary directory, to its mode (and a file's modification
// time and content, a link's target; links are not followed).
func snapshot(ts *testscript.TestScript) map[string]string {
	work := ts.Getenv("WORK")
	out := map[string]string{}
	err := filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(work, p)
		if d.IsDir() && rel == ".tmp" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = fmt.Sprintf("%s -> %s", info.Mode(), target)
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = fmt.Sprintf("%s %s %s", info.Mode(), info.ModTime(), b)
		return err
	})
	ts.Check(err)
	return out
}
