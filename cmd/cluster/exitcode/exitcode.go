// Package exitcode turns an error into kiln's process exit code
// (docs/exit-codes.md), in one place. Libraries return errors that say what
// went wrong (a *graph.InputError, a *graph.BusyError, an
// *atomicfile.SymlinkError, a *platforms.ConfigError) and know nothing of
// exit codes; a command, or a phase of an install, says which kind a
// failure of its own is (With); Of, called once by kiln's main, chooses the
// code with errors.As and errors.Is, never by reading the message.
package exitcode

import (
	"errors"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/platforms"
)

// Kind is a class of failure; its value is the process exit code.
type Kind int

// The kinds, each with its documented exit code (docs/exit-codes.md).
const (
	// Success is no error.
	Success Kind = 0
	// Internal is any error that was not classified.
	Internal Kind = 1
	// Input is bad user input: install-config, flags, edited files.
	Input Kind = 2
	// Infrastructure is a failure to provision or destroy machines.
	Infrastructure Kind = 3
	// Bootstrap is a failure before bootstrap-complete.
	Bootstrap Kind = 4
	// Install is a failure between bootstrap-complete and install-complete.
	Install Kind = 5
	// Busy is another kiln holding the lock of --dir (a *graph.BusyError).
	Busy Kind = 6
	// Interrupted is a run stopped by SIGINT or SIGTERM.
	Interrupted Kind = 130
)

// Error is a command's or a phase's classification of its failure.
type Error struct {
	// Kind is the failure's kind.
	Kind Kind
	// Err is the failure.
	Err error
}

// Error returns the message of the wrapped error.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// With classifies err as kind; it returns nil when err is nil.
func With(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: kind, Err: err}
}

// Of returns the kind of err, whose value is the exit code. The first rule
// that matches decides:
//
//  1. nil is Success;
//  2. a run classified Interrupted (the outermost With) is Interrupted,
//     whatever failed on the way out;
//  3. a *graph.BusyError is Busy;
//  4. what the user fixes, whichever step met it, is Input: a symbolic
//     link where kiln writes in --dir (atomicfile.ErrSymlink), an
//     install-config that only a provisioner found wrong
//     (*platforms.ConfigError), machines named that are not nodes
//     (*platforms.UnknownNodesError);
//  5. else the outermost With, such as the kind of the phase that failed;
//  6. else a *graph.InputError (every one, for several assets that
//     failed: graph.IsInputError) is Input;
//  7. anything else is Internal.
func Of(err error) Kind {
	var classified *Error
	hasKind := errors.As(err, &classified)
	switch {
	case err == nil:
		return Success
	case hasKind && classified.Kind == Interrupted:
		return Interrupted
	case errors.As(err, new(*graph.BusyError)):
		return Busy
	case errors.Is(err, atomicfile.ErrSymlink),
		errors.As(err, new(*platforms.ConfigError)),
		errors.As(err, new(*platforms.UnknownNodesError)):
		return Input
	case hasKind:
		return classified.Kind
	case graph.IsInputError(err):
		return Input
	}
	return Internal
}
