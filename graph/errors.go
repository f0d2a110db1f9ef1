package graph

// InputError is an error in what the user gave kiln rather than in kiln:
// a file of --dir (install-config.yaml, a manifest, a certificate, the
// state file), standard input or the survey's answers, an environment
// variable, a path to explain. The user fixes it. Its message already
// names the file and field at fault, so the store prints it without the
// asset path (AssetError) and reports the same message once, however many
// assets met it; and a failed dependency never hides an asset's own bad
// file.
type InputError struct {
	// Err is the problem; its message names the file and field.
	Err error
}

// Error returns the message of the wrapped error.
func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *InputError) Unwrap() error { return e.Err }

// IsInputError reports whether err is the user's to fix: an *InputError is
// on its chain. Errors, several assets failing at once, is when each of
// them is; an error joining others (errors.Join) is when one of them is.
func IsInputError(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *InputError:
		return true
	case Errors:
		for _, ae := range e {
			if !IsInputError(ae) {
				return false
			}
		}
		return len(e) > 0
	case interface{ Unwrap() error }:
		return IsInputError(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if IsInputError(inner) {
				return true
			}
		}
	}
	return false
}
