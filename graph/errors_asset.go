package graph

import (
	"errors"
	"fmt"
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
// "ignition/bootstrap <- manifests/dns: boom". Input errors (KindInput)
// already name the file and field at fault and print flat.
func (e *AssetError) Error() string {
	if KindOf(e.Err) == KindInput {
		return e.Err.Error()
	}
	return strings.Join(e.Path, " <- ") + ": " + e.Err.Error()
}

// Unwrap returns the asset's own error.
func (e *AssetError) Unwrap() error { return e.Err }

// under returns the error as seen from a dependent asset: the same error with
// id prepended to the path, never a second layer of wrapping.
func under(id string, err error) error {
	var ae *AssetError
	if errors.As(err, &ae) {
		return &AssetError{Path: append([]string{id}, ae.Path...), Err: ae.Err}
	}
	return &AssetError{Path: []string{id}, Err: err}
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
