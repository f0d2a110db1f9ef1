package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kiln-project/kiln/platforms"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// TestTerraformEngineBuild builds OpenTofu from the Go module proxy into an
// empty cache (KILN_E2E_CACHE_DIR, else a temporary directory) as kiln does
// when no fitting engine is on PATH, checks the result's version, and that
// a second call reuses it without building.
func TestTerraformEngineBuild(t *testing.T) {
	if os.Getenv("KILN_E2E") != "1" || os.Getenv("KILN_E2E_ENGINE_BUILD") != "1" {
		t.Skip("builds OpenTofu from the Go module proxy (11-22 min on 2 cores): set KILN_E2E=1 KILN_E2E_ENGINE_BUILD=1 to run it; " +
			"`make test` does not, since an engine on PATH is used when it fits")
	}
	cache := os.Getenv("KILN_E2E_CACHE_DIR")
	if cache == "" {
		cache = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	o := tf.BuildOptions{CacheDir: cache, Log: testLogger(t), Progress: platforms.NoProgress{}}
	start := time.Now()
	e, err := tf.BuildEngine(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BuildEngine: %s in %s", e, time.Since(start).Round(time.Second))
	if e.Name != tf.OpenTofu || e.Version != "1.12.6" {
		t.Errorf("built %s, want tofu 1.12.6", e)
	}
	start = time.Now()
	again, err := tf.BuildEngine(ctx, o)
	if err != nil || again.Path != e.Path {
		t.Fatalf("second BuildEngine = %v, %v; want the cached %s", again, err, e.Path)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("second BuildEngine took %s: it rebuilt", d)
	}
}
