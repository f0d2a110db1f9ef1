package installconfig

import (
	"context"
	"io"
	"net/url"
)

// Input is where the install-config asset reads a new install-config when
// neither --dir nor the state file has one. The CLI attaches it to the
// context with WithInput.
type Input struct {
	// In is standard input.
	In io.Reader
	// Out receives the survey's questions (standard error).
	Out io.Writer
	// Terminal is true when In is a terminal: the survey runs. Otherwise In
	// is read as install-config YAML.
	Terminal bool
	// ReadSecret reads one line without echo (the pull secret); nil reads
	// a plain line from In.
	ReadSecret func() ([]byte, error)
	// HomeDir is where the survey looks for ~/.ssh/*.pub.
	HomeDir string
}

type inputKey struct{}

// WithInput returns ctx carrying in for the install-config asset.
func WithInput(ctx context.Context, in Input) context.Context {
	return context.WithValue(ctx, inputKey{}, in)
}

func inputFrom(ctx context.Context) (Input, bool) {
	in, ok := ctx.Value(inputKey{}).(Input)
	return in, ok && in.In != nil
}

// redactURL hides the password of a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
