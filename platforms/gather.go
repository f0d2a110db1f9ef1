package platforms

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// gatherCommand is one file of a machine's diagnostics.
type gatherCommand struct {
	file string
	argv []string
}

// gatherCommands are what `kiln gather bootstrap` runs on each machine.
func gatherCommands() []gatherCommand {
	units := []string{"bootkube", "kubelet", "containerd", "kiln-ignition", "kiln-images", "kiln-etcd-certs", "kiln-mcs", "kiln-netd", "kiln-api-proxy"}
	journal := []string{"journalctl", "--no-pager", "-b", "-o", "short-precise"}
	for _, u := range units {
		journal = append(journal, "-u", u+".service")
	}
	return []gatherCommand{
		{"journal.log", journal},
		{"failed-units.txt", []string{"systemctl", "--no-pager", "--failed"}},
		{"containers.txt", []string{"ctr", "-n", "k8s.io", "containers", "ls"}},
		{"images.txt", []string{"ctr", "-n", "k8s.io", "images", "ls", "-q"}},
		{"pod-logs.tar.gz", []string{"tar", "-C", "/var/log", "-czf", "-", "pods"}},
		{"static-pods.txt", []string{"ls", "-l", nodelayout.StaticPodDir, nodelayout.StagedPodDir, nodelayout.RetiredPodDir}},
	}
}

// GatherMachine writes the diagnostics of the machine called name, read
// through run, into dir (made 0700), one file per command; a command that
// fails leaves its error in its file instead.
func GatherMachine(ctx context.Context, run RunFunc, name, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, c := range gatherCommands() {
		out, err := run(ctx, name, c.argv...)
		if err != nil {
			out = append(out, []byte(fmt.Sprintf("\n%s: %v\n", strings.Join(c.argv, " "), err))...)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), out, 0o600); err != nil {
			return err
		}
	}
	return nil
}
