package shellquote

import (
	"os/exec"
	"testing"
)

// TestQuote: what /bin/sh makes of a quoted word is the word itself.
func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "two words", "it's", `a "b" $c \d`, "'", "new\nline"} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: the shell read %q (%v)", s, Quote(s), out, err)
		}
	}
}
