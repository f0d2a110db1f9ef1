package graph_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// sizedAsset loads every file matching its pattern, as files of its kind of
// input.
type sizedAsset struct {
	input   graph.Input
	pattern string
	Sizes   []int `json:"sizes"`
}

func (*sizedAsset) ID() string                                    { return "sized" }
func (*sizedAsset) Name() string                                  { return "sized" }
func (*sizedAsset) Dependencies() []graph.Asset                   { return nil }
func (*sizedAsset) Generate(context.Context, graph.Parents) error { return nil }
func (*sizedAsset) Files() []*graph.File                          { return nil }
func (a *sizedAsset) InputKind() graph.Input                      { return a.input }

func (a *sizedAsset) Load(f graph.FileFetcher) (bool, error) {
	names, err := f.Names(a.pattern)
	if err != nil || len(names) == 0 {
		return false, err
	}
	for _, n := range names {
		file, err := f.FetchByName(n)
		if err != nil {
			return false, err
		}
		a.Sizes = append(a.Sizes, len(file.Data))
	}
	return true, nil
}

// sparse makes dir/name a file of size bytes that takes no disk space.
func sparse(t *testing.T, dir, name string, size int64) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// sizeError returns the *SizeError in err after checking that err is an
// input error.
func sizeError(t *testing.T, err error) *graph.SizeError {
	t.Helper()
	var se *graph.SizeError
	if !graph.IsInputError(err) || !errors.As(err, &se) {
		t.Fatalf("err = %v, want an input error with a *SizeError", err)
	}
	return se
}

// A file past its kind's limit is refused by its size before it is read:
// a 1 TiB sparse file costs nothing. A file at the limit is read.
func TestFilePastItsLimitIsRefusedUnread(t *testing.T) {
	const tib = 1 << 40
	tests := []struct {
		input graph.Input
		size  int64
		ok    bool
	}{
		{graph.OtherInput, graph.MaxOtherSize, true},
		{graph.OtherInput, graph.MaxOtherSize + 1, false},
		{graph.InstallConfigInput, graph.MaxInstallConfigSize + 1, false},
		{graph.TLSInput, tib, false},
		{graph.KubeconfigInput, tib, false},
		{graph.ManifestInput, graph.MaxManifestSize + 1, false},
		{graph.IgnitionInput, tib, false},
	}
	for _, tc := range tests {
		t.Run(tc.input.String(), func(t *testing.T) {
			dir := t.TempDir()
			sparse(t, dir, "in/f", tc.size)
			s, _ := open(t, dir)
			start := time.Now()
			a := &sizedAsset{input: tc.input, pattern: "in/*"}
			err := s.Fetch(t.Context(), a)
			if tc.ok {
				if err != nil || len(a.Sizes) != 1 || int64(a.Sizes[0]) != tc.size {
					t.Fatalf("Fetch = %v, read %v; want the file read whole", err, a.Sizes)
				}
				return
			}
			se := sizeError(t, err)
			want := graph.SizeError{Path: "in/f", Input: tc.input, Size: tc.size, Limit: tc.input.MaxSize()}
			if *se != want {
				t.Errorf("SizeError = %+v, want %+v", *se, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusing the file took %s: it was read", d)
			}
		})
	}
}

// A file whose size stat does not tell (procfs says 0) or that grows while
// kiln reads it is read no further than its limit. The file is read from
// its own directory: kiln follows no symbolic link below --dir, so a link
// to it cannot stand in.
func TestFileGrowingPastItsLimitIsCut(t *testing.T) {
	const dir, name = "/proc", "kallsyms" // regular, size 0, megabytes long when read
	if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || len(b) <= graph.MaxOtherSize {
		t.Skipf("%s/%s is not there or short (%d bytes, %v)", dir, name, len(b), err)
	}
	_, err := graph.ReadFile(dir, name, graph.OtherInput)
	se := sizeError(t, err)
	want := graph.SizeError{Path: name, Input: graph.OtherInput, Size: graph.MaxOtherSize + 1, Limit: graph.MaxOtherSize, Unsized: true}
	if *se != want {
		t.Errorf("SizeError = %+v, want %+v", *se, want)
	}
}

// Manifests are bounded together too: the file that takes them past
// MaxManifestsSize is named, before it is read.
func TestManifestsTogetherAreBounded(t *testing.T) {
	dir := t.TempDir()
	const each = graph.MaxManifestSize - 1
	n := graph.MaxManifestsSize/each + 1
	for i := range n {
		sparse(t, dir, "manifests/"+string(rune('a'+i))+".yaml", each)
	}
	s, _ := open(t, dir)
	se := sizeError(t, s.Fetch(t.Context(), &sizedAsset{input: graph.ManifestInput, pattern: "manifests/*"}))
	last := "manifests/" + string(rune('a'+n-1)) + ".yaml"
	want := graph.SizeError{Path: last, Input: graph.ManifestInput, Size: int64(n) * each, Limit: graph.MaxManifestsSize, Total: true}
	if *se != want {
		t.Errorf("SizeError = %+v, want %+v", *se, want)
	}
}

// The state file and the journal are bounded like any input.
func TestOversizedStateIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input graph.Input
	}{
		{installdir.State, graph.StateInput},
		{installdir.Journal, graph.JournalInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sparse(t, dir, tc.name, 1<<40)
			_, err := graph.Open(dir)
			se := sizeError(t, err)
			want := graph.SizeError{Path: tc.name, Input: tc.input, Size: 1 << 40, Limit: tc.input.MaxSize()}
			if *se != want {
				t.Errorf("SizeError = %+v, want %+v", *se, want)
			}
		})
	}
}

func TestSizeErrorMessage(t *testing.T) {
	tests := []struct {
		err  graph.SizeError
		want string
	}{
		{graph.SizeError{Path: "manifests/50-big.yaml", Input: graph.ManifestInput, Size: 100 << 20, Limit: graph.MaxManifestSize},
			"manifests/50-big.yaml is 104857600 bytes (100.0 MiB), more than the 8388608 bytes (8.0 MiB) kiln reads for a manifest or static pod; it was not read"},
		{graph.SizeError{Path: "manifests/60-x.yaml", Input: graph.ManifestInput, Size: 40 << 20, Limit: graph.MaxManifestsSize, Total: true},
			"manifests/60-x.yaml: with it, the files kiln reads as a manifest or static pod come to 41943040 bytes (40.0 MiB) together, " +
				"more than the 33554432 bytes (32.0 MiB) it reads of them; make them smaller or fewer"},
		{graph.SizeError{Path: "standard input", Input: graph.InstallConfigInput, Size: 1<<20 + 1, Limit: graph.MaxInstallConfigSize, Unsized: true},
			"standard input holds more than 1048576 bytes (1.0 MiB), the most kiln reads for install-config; it was not used"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant       %q", got, tc.want)
		}
	}
}
