package graph

import "errors"

// Kind classifies an error for the process exit code.
type Kind int

// Error kinds, each with its documented exit code (docs/exit-codes.md).
const (
	// KindInternal is any error that was not classified.
	KindInternal Kind = 1
	// KindInput is bad user input: install-config, flags, edited files.
	KindInput Kind = 2
	// KindInfrastructure is a failure to provision or destroy machines.
	KindInfrastructure Kind = 3
	// KindBootstrap is a failure before bootstrap-complete.
	KindBootstrap Kind = 4
	// KindInstall is a failure between bootstrap-complete and install-complete.
	KindInstall Kind = 5
	// KindBusy is another kiln holding the lock of --dir (a *BusyError).
	KindBusy Kind = 6
	// KindInterrupted is a run stopped by SIGINT or SIGTERM.
	KindInterrupted Kind = 130
)

// KindError attaches a Kind to an error.
type KindError struct {
	Kind Kind
	Err  error
}

// Error returns the message of the wrapped error.
func (e *KindError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *KindError) Unwrap() error { return e.Err }

// WithKind classifies err; it returns nil when err is nil.
func WithKind(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &KindError{Kind: kind, Err: err}
}

// KindOf returns the outermost Kind attached to err, or KindInternal.
func KindOf(err error) Kind {
	var ke *KindError
	if errors.As(err, &ke) {
		return ke.Kind
	}
	return KindInternal
}
