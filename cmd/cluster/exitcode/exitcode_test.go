package exitcode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
)

// TestOf maps errors as libraries and commands return them to their kinds:
// every documented code, and the rules that decide when several apply.
func TestOf(t *testing.T) {
	boom := errors.New("boom")
	input := &graph.InputError{Err: errors.New("install-config.yaml: metadata.name: Invalid value")}
	busy := &graph.BusyError{Dir: "/d", Holder: &graph.Holder{PID: 7, Command: "kiln create cluster"}}
	link := &atomicfile.SymlinkError{Path: "/d/auth", Target: "/etc"}
	config := &platforms.ConfigError{Err: errors.New("machineNetwork: no room for 5 machines")}
	unknown := &platforms.UnknownNodesError{InfraID: "demo", Unknown: []string{"x"}, Nodes: []string{"demo-master-0"}}
	assetErr := func(err error, path ...string) *graph.AssetError { return &graph.AssetError{Path: path, Err: err} }

	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"no error", nil, Success},

		{"unclassified", boom, Internal},
		{"an asset that failed for no reason of the user's", assetErr(boom, "ignition/bootstrap", "manifests/dns"), Internal},
		{"a command that says internal", With(Internal, boom), Internal},
		{"several assets, not all of them input", graph.Errors{assetErr(input, "a"), assetErr(boom, "b")}, Internal},

		{"input error", input, Input},
		{"input error, wrapped", fmt.Errorf("load: %w", input), Input},
		{"input error of an asset", assetErr(input, "ignition/bootstrap", "installconfig"), Input},
		{"several assets, every one input", graph.Errors{assetErr(input, "a"), assetErr(&graph.InputError{Err: boom}, "b")}, Input},
		{"a command that says input", With(Input, boom), Input},

		{"infrastructure", With(Infrastructure, boom), Infrastructure},
		{"bootstrap", With(Bootstrap, boom), Bootstrap},
		{"install", With(Install, boom), Install},

		{"busy", busy, Busy},
		{"busy, wrapped", fmt.Errorf("lock: %w", busy), Busy},

		{"interrupted", With(Interrupted, boom), Interrupted},
		{"interrupted beats a failure on the way out", With(Interrupted, With(Install, boom)), Interrupted},
		{"interrupted beats busy", With(Interrupted, busy), Interrupted},
		{"interrupted beats a link", With(Interrupted, link), Interrupted},
		{"interrupted beats a config error", With(Interrupted, With(Infrastructure, config)), Interrupted},

		// What the user fixes is input whichever step met it.
		{"a symbolic link in --dir", link, Input},
		{"a symbolic link met by a phase", With(Infrastructure, fmt.Errorf("write: %w", link)), Input},
		{"a symbolic link a command called internal", With(Internal, link), Input},
		{"a symbolic link among several assets' errors", graph.Errors{assetErr(boom, "a"), assetErr(link, "b")}, Input},
		{"a config error met by provision", With(Infrastructure, fmt.Errorf("layout: %w", config)), Input},
		{"a config error met by start", With(Infrastructure, config), Input},
		{"a config error met by scaling", With(Install, config), Input},
		{"unknown nodes met by a load", With(Infrastructure, unknown), Input},

		// Otherwise the outermost classification decides.
		{"a phase's kind beats an input error it met", With(Bootstrap, fmt.Errorf("kubeconfig: %w", input)), Bootstrap},
		{"the outermost classification", With(Input, With(Install, boom)), Input},
		{"the outermost classification, wrapped", fmt.Errorf("scale: %w", With(Install, With(Input, boom))), Install},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.err); got != tt.want {
				t.Errorf("Of(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// A real lock held and a real link refused map as the constructed ones do.
func TestOfLibraryErrors(t *testing.T) {
	dir := t.TempDir()
	l, err := graph.LockDir(dir, "kiln create cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if _, err := graph.LockDir(dir, "kiln destroy cluster"); Of(err) != Busy {
		t.Errorf("second lock: %v: kind %d, want %d", err, Of(err), Busy)
	}

	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "auth")); err != nil {
		t.Fatal(err)
	}
	w := &atomicfile.Writer{Root: dir}
	err = With(Internal, w.Write(filepath.Join(dir, "auth", "kubeconfig"), []byte("x"), 0o600))
	if Of(err) != Input {
		t.Errorf("write through a link: %v: kind %d, want %d", err, Of(err), Input)
	}
}

// TestDocumentedCodes checks docs/exit-codes.md against the kinds: each
// kind is documented once, with its code.
func TestDocumentedCodes(t *testing.T) {
	kinds := map[string]Kind{
		"Internal": Internal, "Input": Input, "Infrastructure": Infrastructure, "Bootstrap": Bootstrap,
		"Install": Install, "Busy": Busy, "Interrupted": Interrupted,
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "exit-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| *(\\d+) *\\| *`exitcode\\.(\\w+)` *\\|").FindAllSubmatch(doc, -1)
	seen := map[string]bool{}
	for _, r := range rows {
		code, _ := strconv.Atoi(string(r[1]))
		name := string(r[2])
		k, ok := kinds[name]
		switch {
		case !ok:
			t.Errorf("docs/exit-codes.md documents exitcode.%s, which is no kind", name)
		case int(k) != code:
			t.Errorf("docs/exit-codes.md: exitcode.%s is %d, the code says %d", name, code, k)
		case seen[name]:
			t.Errorf("docs/exit-codes.md documents exitcode.%s twice", name)
		}
		seen[name] = true
	}
	for name := range kinds {
		if !seen[name] {
			t.Errorf("docs/exit-codes.md does not document exitcode.%s", name)
		}
	}
}
