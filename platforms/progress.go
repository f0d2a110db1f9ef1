package platforms

import "strings"

// Progress reports long-running steps (builds, provisioning, waits) to the
// user with their elapsed time. Implementations are safe for concurrent use.
type Progress interface {
	// Start begins a step and returns the function that ends it with the
	// step's result (nil for success).
	Start(title string) (end func(err error))
	// Update sets a detail line for the current step, such as what a wait
	// is waiting for.
	Update(detail string)
}

// NoProgress is a Progress that reports nothing; for tests and library use.
type NoProgress struct{}

// Start implements Progress.
func (NoProgress) Start(string) func(error) { return func(error) {} }

// Update implements Progress.
func (NoProgress) Update(string) {}

// NameList lists machine names for a progress line or a message: comma
// separated, or "none".
func NameList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
