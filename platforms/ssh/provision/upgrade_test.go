package provision

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHasPayloadScript(t *testing.T) {
	dir := t.TempDir()
	staged, merged, link := filepath.Join(dir, "staged"), filepath.Join(dir, "merged"), filepath.Join(dir, "link")
	run := func() string {
		out, err := exec.Command("sh", "-c", hasPayloadScript(staged, merged, link)).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(); got != "no" {
		t.Errorf("nothing there: %q", got)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "no" {
		t.Errorf("a link to a directory counts: %q", got)
	}
	if err := os.Mkdir(merged, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "yes" {
		t.Errorf("the merged extension: %q", got)
	}
}
