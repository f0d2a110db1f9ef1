package machine

// InvalidError is a request refused before anything on the host is
// touched: a bad machine name or spec, a bad bridge name or address. Every
// other error of this package is a failure on the host.
type InvalidError struct {
	Err error
}

// Error returns the message of the wrapped error.
func (e *InvalidError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *InvalidError) Unwrap() error { return e.Err }
