package status

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock returns a clock that advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

// TestPlainLines checks the output without a terminal: a start line, detail
// lines, and one end line per step with its mark and elapsed time; a new
// step ends the running one as successful, and that step's own end is then
// a no-op.
func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	s := New(&buf, false)
	s.now = fakeClock(time.Second)

	endA := s.Start("provision")
	s.Update("2 of 3 machines")
	s.Update("2 of 3 machines") // unchanged detail: not printed again
	endA(nil)
	endB := s.Start("wait for bootstrap")
	endC := s.Start("wait for install")
	endB(errors.New("ignored: the step was already ended"))
	s.Update("nodes")
	endC(nil)
	endC(nil) // a second end is a no-op

	want := strings.Join([]string{
		" • provision ...",
		"   2 of 3 machines (1s)",
		" ✓ provision (2s)",
		" • wait for bootstrap ...",
		" ✓ wait for bootstrap (1s)",
		" • wait for install ...",
		"   nodes (1s)",
		" ✓ wait for install (2s)",
	}, "\n") + "\n"
	if got := buf.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestFailedStep checks that an error ends the step with a cross.
func TestFailedStep(t *testing.T) {
	var buf bytes.Buffer
	s := New(&buf, false)
	s.now = fakeClock(time.Second)
	s.Start("destroy")(errors.New("boom"))
	if want := " • destroy ...\n ✗ destroy (1s)\n"; buf.String() != want {
		t.Errorf("output %q, want %q", buf.String(), want)
	}
}

// TestConcurrentStepsOnTerminal starts and ends steps from several
// goroutines with the spinner on. Every step must get exactly one end line
// and the writer must only be used under the lock. Ending a step used to
// unlock the Status while it waited for the spinner to stop, so a
// concurrent Start could end the same step again (closing its stop channel
// twice) or have its own new step ended in its place. Run it with -race.
func TestConcurrentStepsOnTerminal(t *testing.T) {
	var buf bytes.Buffer // not safe for concurrent use: the race detector sees any unlocked write
	s := New(&buf, true)
	const workers, steps = 4, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range steps {
				end := s.Start(fmt.Sprintf("step-%d-%d", w, i))
				s.Update("working")
				end(nil)
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	out := buf.String()
	running := s.title
	s.mu.Unlock()
	if running != "" {
		t.Errorf("step %q still running after every step ended", running)
	}
	for w := range workers {
		for i := range steps {
			line := fmt.Sprintf(" ✓ step-%d-%d (", w, i)
			if n := strings.Count(out, line); n != 1 {
				t.Errorf("step-%d-%d has %d end lines, want 1", w, i, n)
			}
		}
	}
}

// TestSpinnerStopsAtEnd checks that the spinner writes nothing once its
// step has ended.
func TestSpinnerStopsAtEnd(t *testing.T) {
	var buf bytes.Buffer
	s := New(&buf, true)
	end := s.Start("spin")
	time.Sleep(400 * time.Millisecond) // a few spinner frames
	end(nil)
	s.mu.Lock()
	frames := strings.Count(buf.String(), "spin (")
	after := buf.Len()
	s.mu.Unlock()
	if frames < 2 {
		t.Errorf("%d spinner frames or end lines, want at least one of each:\n%q", frames, buf.String())
	}
	time.Sleep(400 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if buf.Len() != after {
		t.Errorf("the spinner wrote after its step ended: %q", buf.String()[after:])
	}
}
