package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCLIScripts runs the scripts in test/cli/*.txtar. A script is a txtar
// archive: its comment holds one command per line, its files are inputs and
// expected outputs. Commands (a leading "!" expects failure or negates):
//
//	stdin NAME               standard input of the next kiln run
//	[!] kiln ARGS...         run kiln; $WORK is the test's directory (the default --dir)
//	code N                   exit code of the last run
//	[!] stdout|stderr RE     output of the last run matches RE
//	[!] exists PATH          a file exists under $WORK
//	cp NAME PATH             write archive file NAME to PATH
//	replace PATH OLD NEW     edit a file
//	cmp PATH NAME            PATH has exactly the content of NAME
//	mode PATH PERM           PATH has permission PERM (octal)
//	snapshot                 remember every file under $WORK
//	unchanged [-log]         $WORK is byte-for-byte as snapshot (-log: but .kiln.log)
//
// Quote words with spaces: 'raw' or "Go syntax".
func TestCLIScripts(t *testing.T) {
	scripts, err := filepath.Glob("../../test/cli/*.txtar")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, s := range scripts {
		t.Run(strings.TrimSuffix(filepath.Base(s), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(s)
			if err != nil {
				t.Fatal(err)
			}
			comment, files := parseTxtar(data)
			st := &scriptState{t: t, work: t.TempDir(), files: files}
			for i, line := range strings.Split(comment, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				st.line = fmt.Sprintf("%s:%d: %s", filepath.Base(s), i+1, line)
				st.run(line)
			}
		})
	}
}

type scriptState struct {
	t              *testing.T
	work, line     string
	files          map[string]string
	stdin          string
	stdout, stderr string
	code           int
	snap           map[string]string
}

func (s *scriptState) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\n"+format+"\nstdout:\n%s\nstderr:\n%s", append(append([]any{s.line}, args...), s.stdout, s.stderr)...)
}

func (s *scriptState) run(line string) {
	neg := strings.HasPrefix(line, "! ")
	args := splitArgs(strings.TrimPrefix(line, "! "))
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "$WORK", s.work)
	}
	path := func(i int) string { return filepath.Join(s.work, args[i]) }
	switch args[0] {
	case "stdin":
		s.stdin = s.file(args[1])
	case "kiln":
		var out, errb bytes.Buffer
		o := &rootOptions{stdin: strings.NewReader(s.stdin), stdout: &out, stderr: &errb}
		kargs := args[1:]
		if !slices.ContainsFunc(kargs, func(a string) bool { return strings.HasPrefix(a, "--dir") }) {
			kargs = append(kargs, "--dir", s.work) // never the source tree
		}
		s.code = execute(context.Background(), o, kargs)
		s.stdin, s.stdout, s.stderr = "", out.String(), errb.String()
		if (s.code != 0) != neg {
			s.fatalf("exit code %d", s.code)
		}
	case "code":
		if want, _ := strconv.Atoi(args[1]); s.code != want {
			s.fatalf("exit code %d, want %d", s.code, want)
		}
	case "stdout", "stderr":
		text := map[string]string{"stdout": s.stdout, "stderr": s.stderr}[args[0]]
		if regexp.MustCompile(args[1]).MatchString(text) == neg {
			s.fatalf("%s match of %q is %v", args[0], args[1], !neg)
		}
	case "exists":
		if _, err := os.Stat(path(1)); (err == nil) == neg {
			s.fatalf("exists %s: %v", args[1], err)
		}
	case "cp":
		if err := os.MkdirAll(filepath.Dir(path(2)), 0o755); err != nil {
			s.fatalf("%v", err)
		}
		if err := os.WriteFile(path(2), []byte(s.file(args[1])), 0o644); err != nil {
			s.fatalf("%v", err)
		}
	case "replace":
		b, err := os.ReadFile(path(1))
		if err != nil || !bytes.Contains(b, []byte(args[2])) {
			s.fatalf("%s does not contain %q (%v)", args[1], args[2], err)
		}
		if err := os.WriteFile(path(1), bytes.ReplaceAll(b, []byte(args[2]), []byte(args[3])), 0o600); err != nil {
			s.fatalf("%v", err)
		}
	case "cmp":
		b, err := os.ReadFile(path(1))
		if err != nil || string(b) != s.file(args[2]) {
			s.fatalf("%s differs from %s (%v):\n%s", args[1], args[2], err, b)
		}
	case "mode":
		st, err := os.Stat(path(1))
		want, _ := strconv.ParseUint(args[2], 8, 32)
		if err != nil || uint64(st.Mode().Perm()) != want {
			s.fatalf("mode of %s: %v %v, want %s", args[1], st, err, args[2])
		}
	case "snapshot":
		s.snap = s.snapshot()
	case "unchanged":
		now := s.snapshot()
		if len(args) > 1 && args[1] == "-log" {
			for k := range now {
				if strings.HasSuffix(k, ".kiln.log") {
					delete(now, k)
					delete(s.snap, k)
				}
			}
		}
		if !maps.Equal(now, s.snap) {
			s.fatalf("$WORK changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(s.snap)), slices.Sorted(maps.Keys(now)))
		}
	default:
		s.fatalf("unknown command %q", args[0])
	}
}

func (s *scriptState) file(name string) string {
	f, ok := s.files[name]
	if !ok {
		s.fatalf("no file %s in the archive", name)
	}
	return f
}

func (s *scriptState) snapshot() map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(s.work, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.work, p)
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = info.Mode().String() + " " + info.ModTime().String() + " " + string(b)
		return err
	})
	if err != nil {
		s.fatalf("%v", err)
	}
	return out
}

// parseTxtar splits a txtar archive into its comment and files.
func parseTxtar(data []byte) (string, map[string]string) {
	files := map[string]string{}
	var comment strings.Builder
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			files[name] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			name = strings.TrimSpace(trimmed[3 : len(trimmed)-3])
			continue
		}
		if name == "" {
			comment.WriteString(line)
		} else {
			body.WriteString(line)
		}
	}
	flush()
	return comment.String(), files
}

// splitArgs splits on spaces; 'single-quoted' words are taken as they are
// and "double-quoted" ones are unquoted with Go syntax.
func splitArgs(line string) []string {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' || line[0] == '`' {
			if q, err := strconv.QuotedPrefix(line); err == nil {
				u, _ := strconv.Unquote(q)
				out = append(out, u)
				line = line[len(q):]
				continue
			}
		}
		if line[0] == '\'' {
			if end := strings.IndexByte(line[1:], '\''); end >= 0 {
				out = append(out, line[1:end+1])
				line = line[end+2:]
				continue
			}
		}
		w, rest, _ := strings.Cut(line, " ")
		out = append(out, w)
		line = rest
	}
	return out
}
