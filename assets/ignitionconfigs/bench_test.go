package ignitionconfigs_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph"
)

// BenchmarkCreateIgnitionConfigs is `kiln create ignition-configs` from
// testdata/install-config.yaml in a fresh --dir: every key, certificate,
// manifest and Ignition config generated and written. It reports the
// process's peak RSS too. Run: go test -run '^$' -bench CreateIgnitionConfigs ./assets/ignitionconfigs/
func BenchmarkCreateIgnitionConfigs(b *testing.B) {
	ic, err := os.ReadFile("testdata/install-config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), ic, 0o600); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		store, err := graph.Open(dir, graph.WithLogger(log))
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Persist(context.Background(), targets.IgnitionConfigs()); err != nil {
			b.Fatal(err)
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
	}
}
