package graph

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// AssetError is the one wrapping the store puts around an error of an asset:
// the path from the asset that was asked for down to the one that failed.
type AssetError struct {
	// Path lists asset IDs from the requested asset to the failing one.
	Path []string
	// Err is the failing asset's own error.
	Err error
}

// Error prints the path and the error, e.g.
// "ignition/bootstrap <- manifests/dns: boom". Input errors (an
// *InputError) already name the file and field at fault and print flat.
func (e *AssetError) Error() string {
	if IsInputError(e.Err) {
		return e.Err.Error()
	}
	return strings.Join(e.Path, " <- ") + ": " + e.Err.Error()
}

// Unwrap returns the asset's own error.
func (e *AssetError) Unwrap() error { return e.Err }

// under returns the error as seen from a dependent asset: the same error with
// id prepended to the path (to each path of several), never a second layer
// of wrapping.
func under(id string, err error) error {
	var list Errors
	if errors.As(err, &list) {
		out := make(Errors, len(list))
		for i, ae := range list {
			out[i] = under(id, ae).(*AssetError)
		}
		return out
	}
	var ae *AssetError
	if errors.As(err, &ae) {
		return &AssetError{Path: append([]string{id}, ae.Path...), Err: ae.Err}
	}
	return &AssetError{Path: []string{id}, Err: err}
}

// Errors is several assets failing in one Fetch: every failing asset once,
// sorted by message, so that a run reports every bad input at once and the
// same way each time.
type Errors []*AssetError

// Error prints one error per line.
func (l Errors) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the errors.
func (l Errors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// joinAssetErrors merges nodes' errors (nil entries are skipped): nil for
// none, the *AssetError itself for one, else Errors with each failing asset
// once (its first path) and each input error's message once, sorted; the
// list is an input error (IsInputError) when every one of them is.
func joinAssetErrors(errs []error) error {
	var all []*AssetError
	for _, err := range errs {
		var list Errors
		var ae *AssetError
		switch {
		case err == nil:
		case errors.As(err, &list):
			all = append(all, list...)
		case errors.As(err, &ae):
			all = append(all, ae)
		default:
			all = append(all, &AssetError{Err: err})
		}
	}
	seen := map[string]bool{}
	var out Errors
	for _, ae := range all {
		key := ""
		if len(ae.Path) > 0 && !IsInputError(ae.Err) {
			key = ae.Path[len(ae.Path)-1]
		}
		// An input error prints flat: several assets refused for the same
		// file (a symbolic link auth/ that every auth/* asset meets) print
		// one line.
		key += "\x00" + ae.Err.Error()
		if !seen[key] {
			seen[key] = true
			out = append(out, ae)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Error() < out[j].Error() })
	return out
}

// CycleError reports a dependency cycle, e.g. a -> b -> a.
type CycleError struct {
	// Cycle lists the IDs along the cycle; the first and last are equal.
	Cycle []string
}

// Error prints the cycle.
func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Cycle, " -> ")
}

// ConflictError reports files the user edited whose own dependencies changed
// since kiln generated them: neither version can be used safely.
type ConflictError struct {
	// Edited are the edited files.
	Edited []string
	// Changed are the files (or asset IDs) whose change invalidates them.
	Changed []string
}

// Error names both sides and the way out.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s was edited, but %s, which it is generated from, changed too; "+
		"re-run with --force-regenerate to discard the edit of %s",
		strings.Join(e.Edited, ", "), strings.Join(e.Changed, ", "), strings.Join(e.Edited, ", "))
}
