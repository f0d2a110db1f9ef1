package nodeimage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
)

// fakeGo stands in for the go command: it appends "<module dir> <args>" to
// $FAKE_LOG, makes every binary of every component in the -o directory of
// a build, and sleeps $FAKE_GO_SLEEP seconds first when set.
const fakeGo = `#!/bin/sh
echo "$(basename "$(dirname "$PWD")") $*" >> "$FAKE_LOG"
[ "$1" = build ] || exit 0
[ -n "$FAKE_GO_SLEEP" ] && sleep "$FAKE_GO_SLEEP"
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
mkdir -p "$out" && for b in $FAKE_BINS; do : > "$out/$b"; done
`

// fakeDebootstrap stands in for debootstrap: it fails after a second when
// $FAKE_DEBOOTSTRAP_FAIL is set, else makes the one file that marks a
// complete tree.
const fakeDebootstrap = `#!/bin/sh
echo "debootstrap $*" >> "$FAKE_LOG"
[ -n "$FAKE_DEBOOTSTRAP_FAIL" ] && { sleep 1; echo "E: $FAKE_DEBOOTSTRAP_FAIL"; exit 1; }
mkdir -p "$4/usr/bin" && : > "$4/usr/bin/systemctl"
`

// laneBuilder returns a builder over an empty cache whose go and
// debootstrap are the fakes above, and the fakes' log file.
func laneBuilder(t *testing.T) (*builder, string) {
	t.Helper()
	bin := t.TempDir()
	for name, script := range map[string]string{"go": fakeGo, "debootstrap": fakeDebootstrap} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for _, c := range Components(release.Default()) {
		all = append(all, c.Built()...)
	}
	logFile := filepath.Join(t.TempDir(), "calls")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_LOG", logFile)
	t.Setenv("FAKE_BINS", strings.Join(all, " "))
	log, _ := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	b := &builder{
		cache: t.TempDir(), hostRoot: "testdata/apt-deb822", goBin: filepath.Join(bin, "go"), goVersion: "go1.26.8",
		log: log, progress: platforms.NoProgress{}, run: runner{log: log},
		// The fake go needs no C toolchain: the build host's packages do not matter.
		host: fakeHost([]string{"gcc", "pkg-config"}, []string{"libseccomp"}),
	}
	return b, logFile
}

// calls returns the fakes' log, one call a line.
func calls(t *testing.T, logFile string) []string {
	t.Helper()
	data, err := os.ReadFile(logFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestBuildPartsLanes checks a build from an empty cache: every component
// is prefetched and then built, each build after its own prefetch and in
// component order, debootstrap runs once, and a second run finds
// everything in the cache and runs nothing.
func TestBuildPartsLanes(t *testing.T) {
	b, logFile := laneBuilder(t)
	p, err := b.buildParts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := calls(t, logFile)
	pos := map[string]int{}
	for i, line := range got {
		f := strings.Fields(line)
		if f[0] == "debootstrap" {
			pos["debootstrap"] = i
			continue
		}
		name := f[0][:strings.LastIndex(f[0], "-")] // <name>-<key>.tmp
		if _, dup := pos[f[1]+" "+name]; dup {
			t.Errorf("%s %s ran twice", f[1], name)
		}
		pos[f[1]+" "+name] = i
	}
	if len(got) != 2*len(Components(release.Default()))+1 {
		t.Errorf("%d calls, want a list and a build per component and one debootstrap:\n%s", len(got), strings.Join(got, "\n"))
	}
	if _, ok := pos["debootstrap"]; !ok {
		t.Error("debootstrap did not run")
	}
	prev := -1
	for _, c := range Components(release.Default()) {
		l, okL := pos["list "+c.Name]
		bu, okB := pos["build "+c.Name]
		if !okL || !okB || l > bu {
			t.Errorf("%s: list at %d (%v), build at %d (%v); want the list (prefetch) first", c.Name, l, okL, bu, okB)
		}
		if bu < prev {
			t.Errorf("%s built out of order", c.Name)
		}
		prev = bu
	}
	for name, path := range p.Bins {
		if !exists(path) {
			t.Errorf("binary %s: %s does not exist", name, path)
		}
	}
	if !exists(filepath.Join(p.Base, "usr/bin/systemctl")) {
		t.Errorf("base tree %s incomplete", p.Base)
	}

	if err := os.Remove(logFile); err != nil {
		t.Fatal(err)
	}
	p2, err := b.buildParts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := calls(t, logFile); len(c) != 1 || c[0] != "" {
		t.Errorf("a cached build ran %q", c)
	}
	if p2.Base != p.Base || len(p2.Bins) != len(p.Bins) {
		t.Errorf("cached build returned %+v, first %+v", p2, p)
	}
}

// TestBuildPartsDebootstrapFailure checks that a failed debootstrap stops
// the Go build running beside it (a fake that sleeps 30 s, whose child
// holds the output pipe as go's compilers do) and is the error returned.
func TestBuildPartsDebootstrapFailure(t *testing.T) {
	b, _ := laneBuilder(t)
	t.Setenv("FAKE_GO_SLEEP", "30")
	t.Setenv("FAKE_DEBOOTSTRAP_FAIL", "Failed getting release file")
	start := time.Now()
	_, err := b.buildParts(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Failed getting release file") {
		t.Fatalf("error %v, want debootstrap's", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("returned after %s: the go build was not stopped", d)
	}
	entries, _ := filepath.Glob(filepath.Join(b.cache, "components", "*", "bin"))
	for _, e := range entries {
		if !strings.Contains(e, ".tmp") {
			t.Errorf("%s published after the failure", e)
		}
	}
}
