package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

var _ platforms.Gatherer = (*Provisioner)(nil)

// gatherCommand is one file of a machine's diagnostics.
type gatherCommand struct {
	file string
	argv []string
}

// gatherCommands are what `kiln gather bootstrap` runs in each machine.
func gatherCommands() []gatherCommand {
	units := []string{"bootkube", "kubelet", "containerd", "kiln-ignition", "kiln-images", "kiln-etcd-certs", "kiln-mcs", "kiln-netd"}
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

// Gather implements platforms.Gatherer: the diagnostics of the bootstrap
// machine and the masters, one directory per machine. A command that fails
// leaves its error in the file instead; only a machine that cannot be
// entered at all is an error.
func (p *Provisioner) Gather(ctx context.Context, infraID, dir string) error {
	mgr := machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log})
	names, err := mgr.List(ctx, infraID+"-")
	if err != nil {
		return err
	}
	var errs []error
	found := 0
	for _, name := range names {
		if !controlPlane(infraID, name) {
			continue
		}
		found++
		end := p.Env.Progress.Start("Gathering logs from " + name)
		err := gatherMachine(ctx, mgr, name, filepath.Join(dir, name))
		end(err)
		errs = append(errs, err)
	}
	if found == 0 {
		return fmt.Errorf("no bootstrap machine or master of %s is running", infraID)
	}
	return errors.Join(errs...)
}

// controlPlane reports whether the machine called name is the bootstrap
// machine or a master of infraID.
func controlPlane(infraID, name string) bool {
	role, _, ok := machines.Index(infraID, name)
	return name == bootstrapMachine(infraID) || (ok && role == machines.RoleMaster)
}

func gatherMachine(ctx context.Context, mgr *machine.Manager, name, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if state, err := mgr.State(ctx, name); err != nil || state != machine.StateRunning {
		return fmt.Errorf("machine %s is %s: %v", name, state, err)
	}
	for _, c := range gatherCommands() {
		out, err := mgr.Exec(ctx, name, c.argv...)
		if err != nil {
			out = append(out, []byte(fmt.Sprintf("\n%s: %v\n", strings.Join(c.argv, " "), err))...)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), out, 0o600); err != nil {
			return err
		}
	}
	return nil
}
