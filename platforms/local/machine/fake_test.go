package machine

import (
	"context"
	"strings"
)

// fakeRunner records command lines and answers from canned outputs keyed
// by the joined command line.
type fakeRunner struct {
	calls    [][]string
	outputs  map[string]string
	errs     map[string]error
	detached [][]string
}

func (f *fakeRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	f.calls = append(f.calls, argv)
	key := strings.Join(argv, " ")
	return []byte(f.outputs[key]), f.errs[key]
}

func (f *fakeRunner) Detach(argv []string, _ string) (int, error) {
	f.detached = append(f.detached, argv)
	return 4242, nil
}

func joined(calls [][]string) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = strings.Join(c, " ")
	}
	return out
}
