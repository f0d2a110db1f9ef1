package terraform

import (
	"bytes"
	"sync"

	"github.com/sirupsen/logrus"
)

// lineLogger is an io.Writer that logs each complete line written to it at
// Debug level with a prefix; Close logs a final partial line. It is safe for
// concurrent use (stdout and stderr may share one).
type lineLogger struct {
	mu     sync.Mutex
	log    logrus.FieldLogger
	prefix string
	buf    []byte
	last   string
}

// newLineLogger returns a lineLogger logging to log with prefix.
func newLineLogger(log logrus.FieldLogger, prefix string) *lineLogger {
	return &lineLogger{log: log, prefix: prefix}
}

// Write implements io.Writer.
func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(string(bytes.TrimRight(l.buf[:i], "\r")))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Close logs what remains after the last newline.
func (l *lineLogger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = nil
	}
	return nil
}

// Last returns the last non-empty line logged, for error messages and
// progress details.
func (l *lineLogger) Last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

func (l *lineLogger) emit(line string) {
	if line != "" {
		l.last = line
	}
	l.log.Debug(l.prefix + line)
}
