// Package enginetest finds a real Terraform engine for tests that run
// kiln's modules and providers through one, and keeps the driver's log to
// show when such a test fails.
package enginetest

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/platforms/terraform"
)

// Find returns tofu or terraform from PATH, probed, or skips t. With
// -short it skips too: every apply starts the test binary as the provider,
// race-instrumented in make unit's -race -short pass (seconds an apply);
// the pass without -short runs these tests.
func Find(t testing.TB) *terraform.Engine {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: round trips through the engine run in the pass without -short")
	}
	for _, name := range []string{terraform.OpenTofu, terraform.Terraform} {
		if p, err := exec.LookPath(name); err == nil {
			if e, err := terraform.ProbeEngine(context.Background(), name, p); err == nil {
				return e
			}
		}
	}
	t.Skip("no tofu >= 1.6 or terraform >= 1.5 on PATH; the round trip through the engine is not run")
	return nil
}

// Log returns a debug logger for a driver whose output t shows only when
// it fails.
func Log(t testing.TB) *logrus.Logger {
	log := logrus.New()
	log.SetLevel(logrus.DebugLevel)
	out := &lockedBuilder{}
	log.SetOutput(out)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(out.String())
		}
	})
	return log
}

// lockedBuilder is a strings.Builder safe for concurrent writes.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *lockedBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
