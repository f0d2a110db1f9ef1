package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/platforms/lb"
)

// Process returns the detached registry process whose files are in dir,
// run from the binary bin: `bin --dir DIR serve --config FILE --pid-file
// FILE`, the command line of kiln's own host daemons, which kiln's build
// of the registry takes.
func Process(bin, dir string) lb.Process {
	return lb.Process{
		Kiln:       bin,
		Subcommand: []string{"serve"},
		Role:       "registry",
		ConfigPath: filepath.Join(dir, ConfigFile),
		PIDFile:    filepath.Join(dir, pidFile),
		LogFile:    filepath.Join(dir, logFile),
	}
}

// StartError is the error of a registry that exited before it listened.
type StartError struct {
	// Reason is the last line of its log, such as a port in use; "" when
	// the log cannot be read.
	Reason string
	// Log is its log file.
	Log string
	// Port is the port it was to listen on.
	Port uint16
}

// Error implements error: what went wrong and what to do.
func (e *StartError) Error() string {
	return fmt.Sprintf("the image registry did not start: %s (see %s); free port %d, or create the cluster with another "+
		"platform.local.registryPort or with platform.local.addons.registry: false", e.Reason, e.Log, e.Port)
}

// Start starts the registry process p, which listens at port, and waits
// until it does. A registry that exits first is a *StartError; one that
// has not listened when ctx ends is killed and ctx's error returned.
func Start(ctx context.Context, p lb.Process, port uint16) error {
	_, err := p.Start(ctx)
	if err != nil && ctx.Err() == nil {
		return &StartError{Reason: lastLogLine(p.LogFile), Log: p.LogFile, Port: port}
	}
	return err
}

// Remove removes the files of the registry whose files are in dir - its
// configuration, pid file, log and storage - and leaves the directory,
// which the API load balancer's files share. The registry must not run.
func Remove(dir string) error {
	var errs []error
	for _, f := range []string{ConfigFile, pidFile, logFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, os.RemoveAll(filepath.Join(dir, StorageDir)))
	return errors.Join(errs...)
}

// logTail is how much of a log lastLogLine reads.
const logTail = 4096

// lastLogLine returns the last non-empty line of the log file at path, ""
// when it cannot be read.
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	buf := make([]byte, min(st.Size(), logTail))
	n, _ := f.ReadAt(buf, st.Size()-int64(len(buf)))
	s := strings.TrimSpace(string(buf[:n]))
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}
