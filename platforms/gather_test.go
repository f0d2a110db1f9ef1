package platforms

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatherMachine: one file per command, 0600, in a 0700 directory; a
// command that fails leaves its output and its error in its file.
func TestGatherMachine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m0")
	var asked []string
	err := GatherMachine(context.Background(), func(_ context.Context, name string, argv ...string) ([]byte, error) {
		asked = append(asked, name+": "+argv[0])
		if argv[0] == "ctr" {
			return []byte("partial"), errors.New("exit status 1")
		}
		return []byte("out of " + argv[0]), nil
	}, "m0", dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("dir: %v %v", st, err)
	}
	for file, want := range map[string]string{
		"journal.log":      "out of journalctl",
		"failed-units.txt": "out of systemctl",
		"containers.txt":   "partial\nctr -n k8s.io containers ls: exit status 1\n",
		"static-pods.txt":  "out of ls",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
		if st, _ := os.Stat(filepath.Join(dir, file)); st == nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", file, st)
		}
	}
	if len(asked) != 6 || !strings.HasPrefix(asked[0], "m0: ") {
		t.Errorf("commands run: %q", asked)
	}
}
