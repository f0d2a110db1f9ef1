package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// debugLog collects every log entry. It buffers until open() names a file
// in --dir; from then on entries are appended to it as they come. A run that
// fails on bad input never creates the file in --dir (the directory must stay
// as it was): its buffer goes to a temporary file instead.
type debugLog struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	file     *os.File
	disabled bool
}

// Annotation values of debugLogAnnotation, for commands that run for a
// long time and so must not buffer their log until they exit.
const (
	// debugLogAnnotation on a command (or a parent) says how it logs.
	debugLogAnnotation = "kiln/debug-log"
	// debugLogStream writes the debug log to --dir from the start.
	debugLogStream = "stream"
	// debugLogNone keeps no debug log: the console (the journal, for node
	// agents) is the log.
	debugLogNone = "none"
)

// disable drops what was buffered and everything after.
func (d *debugLog) disable() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disabled = true
	d.buf = bytes.Buffer{}
}

// Write implements io.Writer.
func (d *debugLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.disabled:
		return len(p), nil
	case d.file != nil:
		return d.file.Write(p)
	}
	return d.buf.Write(p)
}

// open starts appending to path, in or below dir, flushing what was
// buffered. No symbolic link below dir is followed: a link at path is an
// *atomicfile.SymlinkError.
func (d *debugLog) open(dir, path string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.file != nil {
		return nil
	}
	f, err := atomicfile.OpenFile(dir, path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(d.buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	d.buf.Reset()
	d.file = f
	return nil
}

func (d *debugLog) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.file != nil {
		d.file.Close()
		d.file = nil
	}
}

// openDebugLog makes the debug log live in --dir; long-running commands call
// it once their input is known to be good, so the log can be tailed.
func (o *rootOptions) openDebugLog() {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		o.log.Warnf("cannot create %s: %v", o.dir, err)
		return
	}
	if err := o.debug.open(o.dir, filepath.Join(o.dir, installdir.DebugLog)); err != nil {
		o.log.Warnf("cannot write the debug log: %v", err)
	}
}

// finishDebugLog stores the debug log: in --dir unless the run failed on
// bad input, in which case --dir is left untouched and the log goes to a
// temporary file whose path is printed.
func (o *rootOptions) finishDebugLog(err error, kind exitcode.Kind) {
	defer o.debug.close()
	if o.debug.disabled {
		return
	}
	if o.debug.file == nil && o.leaveDir && err == nil {
		return // nothing was done: --dir stays as it was
	}
	if err != nil && kind == exitcode.Input && o.debug.file == nil {
		f, terr := os.CreateTemp("", "kiln-*.log")
		if terr != nil {
			return
		}
		defer f.Close()
		o.debug.mu.Lock()
		_, _ = f.Write(o.debug.buf.Bytes())
		o.debug.mu.Unlock()
		fmt.Fprintf(o.stderr, "debug log: %s\n", f.Name())
		return
	}
	if _, serr := os.Stat(o.dir); serr == nil {
		o.openDebugLog()
	}
}

// debugLogMode is the debugLogAnnotation of cmd or its nearest parent.
func debugLogMode(cmd *cobra.Command) string {
	for c := cmd; c != nil; c = c.Parent() {
		if m, ok := c.Annotations[debugLogAnnotation]; ok {
			return m
		}
	}
	return ""
}

// consoleHook prints entries at or above a level to the console. logrus
// fires hooks outside its lock, and the asset engine logs from several
// goroutines at once: mu keeps each entry's line whole.
type consoleHook struct {
	mu    sync.Mutex
	w     io.Writer
	level logrus.Level
	fmt   logrus.Formatter
}

func (h *consoleHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h *consoleHook) Fire(e *logrus.Entry) error {
	if e.Level > h.level {
		return nil
	}
	b, err := h.fmt.Format(e)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err = h.w.Write(b)
	return err
}

// newLogger returns a logger that writes every entry to the debug log and,
// through a hook, entries at the console level to w.
func newLogger(w io.Writer, debugOut io.Writer) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(debugOut)
	l.SetLevel(logrus.TraceLevel)
	l.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	l.AddHook(&consoleHook{w: w, level: logrus.InfoLevel, fmt: &logrus.TextFormatter{DisableTimestamp: true, DisableQuote: true}})
	return l
}

// consoleLevel sets the level of the console hook.
func consoleLevel(l *logrus.Logger, lvl logrus.Level) {
	for _, hooks := range l.Hooks {
		for _, h := range hooks {
			if c, ok := h.(*consoleHook); ok {
				c.level = lvl
				return
			}
		}
	}
}

// version is the module version kiln was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
