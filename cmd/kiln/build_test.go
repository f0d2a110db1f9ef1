package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// The build command classifies node image errors: what the user fixes
// exits 2, a failed build or export 3.
func TestBuildErrorKinds(t *testing.T) {
	img := &nodeimage.Image{RootFS: t.TempDir()}
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		err  error
		want exitcode.Kind
	}{
		{"unknown --output suffix", img.Export(ctx, filepath.Join(t.TempDir(), "image.zip")), exitcode.Input},
		{"--output in a missing directory", img.Export(ctx, filepath.Join(t.TempDir(), "no", "image.tar")), exitcode.Input},
		{"not root", &nodeimage.PreconditionError{Err: nodeimage.ErrNotRoot}, exitcode.Input},
		{"failed build", errors.New("debootstrap: exit status 1"), exitcode.Infrastructure},
	} {
		if tt.err == nil {
			t.Fatalf("%s: no error", tt.name)
		}
		if got := exitcode.Of(buildError(tt.err)); got != tt.want {
			t.Errorf("%s: kind %d, want %d (%v)", tt.name, got, tt.want, tt.err)
		}
	}
}
