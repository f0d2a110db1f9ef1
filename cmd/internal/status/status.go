// Package status prints short progress lines for long-running steps: a
// spinner with elapsed time on a terminal, plain " ✓ step (12.3s)" lines
// otherwise.
package status

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kiln-project/kiln/platforms"
)

var _ platforms.Progress = (*Status)(nil)

// Status implements platforms.Progress on a writer.
type Status struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	now    func() time.Time
	title  string
	detail string
	start  time.Time
	// stop ends the running step's spinner; closed under mu.
	stop chan struct{}
}

// New returns a Status writing to w; tty enables the spinner.
func New(w io.Writer, tty bool) *Status {
	return &Status{w: w, tty: tty, now: time.Now}
}

// Start begins a step. A step still running is ended as successful first.
func (s *Status) Start(title string) func(error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(nil)
	s.title, s.detail, s.start = title, "", s.now()
	if s.tty {
		s.stop = make(chan struct{})
		go s.spin(s.stop)
	} else {
		fmt.Fprintf(s.w, " • %s ...\n", title)
	}
	started := s.start
	return func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.title == title && s.start == started {
			s.endLocked(err)
		}
	}
}

// Update sets the detail shown with the current step.
func (s *Status) Update(detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.title == "" || detail == s.detail {
		return
	}
	s.detail = detail
	if !s.tty {
		fmt.Fprintf(s.w, "   %s (%s)\n", detail, s.elapsedLocked())
	}
}

func (s *Status) elapsedLocked() string {
	return s.now().Sub(s.start).Round(100 * time.Millisecond).String()
}

// endLocked ends the running step; s.mu is held throughout. The spinner
// needs no waiting for: it writes only under s.mu after checking its stop
// channel, so once stop is closed here it never writes again.
func (s *Status) endLocked(err error) {
	if s.title == "" {
		return
	}
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
		fmt.Fprint(s.w, "\r\033[K")
	}
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	fmt.Fprintf(s.w, " %s %s (%s)\n", mark, s.title, s.elapsedLocked())
	s.title, s.detail = "", ""
}

// spin draws the spinner of the running step until stop is closed.
func (s *Status) spin(stop chan struct{}) {
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-t.C:
			s.mu.Lock()
			select {
			case <-stop: // the step ended while this tick waited for the lock
				s.mu.Unlock()
				return
			default:
			}
			line := fmt.Sprintf("\r\033[K %s %s (%s)", frames[i%len(frames)], s.title, s.elapsedLocked())
			if s.detail != "" {
				line += " " + s.detail
			}
			fmt.Fprint(s.w, line)
			s.mu.Unlock()
		}
	}
}
