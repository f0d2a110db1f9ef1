// Package restore is `kiln restore cluster`: it brings a cluster's etcd
// back from a backup of `kiln backup cluster` when etcd lost quorum or its
// data. It stops every master's etcd and API server, restores the
// snapshot on one master as a new one-member cluster, starts its API
// server, and adds the other masters' members again through the API as
// `kiln scale cluster` finishes a master's join: as learners, promoted
// once caught up. Each master's old etcd data is kept beside the new one.
// In a --dir without a cluster it first re-creates the backup's cluster
// on new machines (recreate.go): the backup's state with its CAs and
// names, new leaf certificates and bootstrap credentials.
package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/scale"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
)

// Options are the flags of kiln restore cluster.
type Options struct {
	// From is the backup archive.
	From string
	// Identity is the age identity file that decrypts an encrypted
	// archive; "" for one that is not.
	Identity string
	// Timeout bounds each wait: the API on the restored master, each
	// master's join, every node Ready.
	Timeout time.Duration
}

// Journal is what --dir records of a restore under way, so that a run cut
// short goes on with the same name (every master's part of it is done
// once) instead of restoring again.
type Journal struct {
	// Run names the restore on the masters.
	Run string `json:"run"`
	// Snapshot is the SHA-256 of the backup's snapshot.
	Snapshot string `json:"snapshot"`
	// Seed is the master that restores the snapshot; "" until the
	// cluster's machines are known (a restore that re-creates them).
	Seed string `json:"seed"`
	// Recreate says --dir held no cluster when the restore began: it
	// re-creates the backup's cluster (Seed, then create cluster) and
	// restores etcd on the new machines. Configs says the Ignition
	// configs are written with the backup's CAs, Created that create
	// cluster finished.
	Recreate bool `json:"recreate,omitempty"`
	Configs  bool `json:"configs,omitempty"`
	Created  bool `json:"created,omitempty"`
}

// Cluster restores c's etcd from the backup o.From (see the package
// comment), printing each step to out.
func Cluster(ctx context.Context, c *install.Cluster, prov platforms.Provisioner, o Options, log logrus.FieldLogger,
	progress platforms.Progress, out io.Writer) error {
	now := time.Now
	start := now()
	const manual = "restore etcd with etcd's own procedure (docs/upgrade.md, \"Restoring etcd from the snapshot\")"
	shell, ok := prov.(platforms.NodeShell)
	if !ok {
		return exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot reach its machines without the cluster's API, so kiln cannot restore it yet: %s",
			c.Config.PlatformName(), manual))
	}
	// The snapshot waits in --dir (0600, atomicfile's prefix for a sweep
	// after a crash) while it is checked and copied to the master.
	snap, err := os.CreateTemp(c.Dir, atomicfile.TempPrefix+"restore-*.db")
	if err != nil {
		return err
	}
	defer os.Remove(snap.Name())
	defer snap.Close()
	m, err := readBackup(o.From, o.Identity, backup.Sinks{Snapshot: snap})
	if err == nil {
		err = snap.Sync()
	}
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	if m.InfraID != c.InfraID {
		return exitcode.With(exitcode.Input, fmt.Errorf("--from: %s is a backup of cluster %s (infra ID %s); --dir holds %s (infra ID %s). "+
			"To bring the backup's cluster back on new machines instead, restore it in a --dir without a cluster (after kiln destroy cluster): "+
			"it is created again with the backup's names and CAs first",
			o.From, m.Cluster, m.InfraID, c.Config.Metadata.Name, c.InfraID))
	}
	masters := c.Machines().Masters
	j, err := journal(c, m, masters, now())
	if err != nil {
		return err
	}
	ips, ok, err := installconfig.MachineAddresses(c.Config, c.Resolved, c.InfraID, j.Seed)
	if err != nil {
		return fmt.Errorf("the address of master %s: %w", j.Seed, err)
	}
	if !ok || len(ips) == 0 {
		return exitcode.With(exitcode.Input, fmt.Errorf("platform %s does not say the address of master %s", c.Config.PlatformName(), j.Seed))
	}
	peerURL := etcdmembers.PeerURL(ips[0].String())
	fmt.Fprintf(out, "Restoring etcd of %s from %s (taken %s, Kubernetes %s) as restore %s:\n"+
		"  every master's etcd and API server stop; %s restores the snapshot as a new one-member cluster;\n"+
		"  the other masters join it again. Everything written since the backup is lost; each master keeps\n"+
		"  its old etcd data in %s.\n",
		c.InfraID, o.From, m.TakenAt.Format("2006-01-02 15:04:05 UTC"), m.Kubernetes, j.Run, j.Seed,
		nodelayout.EtcdRestoreAside(nodelayout.EtcdDataDir, j.Run))

	// The other masters first, at once: no API server may serve from an
	// old etcd once the restored one answers.
	var others []string
	for _, name := range masters {
		if name != j.Seed {
			others = append(others, name)
		}
	}
	if err := stopOthers(ctx, shell, &c.Cluster, j.Run, others, progress, out, now); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	t := now()
	end := progress.Start("Restoring the snapshot on " + j.Seed)
	err = putSnapshot(ctx, shell, &c.Cluster, j.Seed, snap)
	var outp []byte
	if err == nil {
		outp, err = shell.RunOnNode(ctx, &c.Cluster, j.Seed, NodeArgv(j.Run, nodelayout.EtcdRestoreSnapshot, j.Seed, peerURL)...)
	}
	end(err)
	if err != nil {
		return exitcode.With(exitcode.Install, fmt.Errorf("master %s: %w", j.Seed, nodeError(err, outp)))
	}
	// Done with: what follows opens --dir's state, which sweeps
	// atomicfile's temporary files.
	snap.Close()
	if err := os.Remove(snap.Name()); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: snapshot restored, etcd and the API server started on it (%s)\n", j.Seed, now().Sub(t).Round(100*time.Millisecond))

	api, err := c.API(log, progress, prov)
	if err != nil {
		return err
	}
	if _, err := api.API(ctx, api.Server, o.Timeout); err != nil {
		return exitcode.With(exitcode.Install, fmt.Errorf("the API after the restore on %s: %w", j.Seed, err))
	}
	// The other masters have no member now: scale finishes their joins.
	if err := scale.Scale(ctx, c, prov, scale.Options{Masters: -1, Workers: -1, Yes: true, JoinTimeout: o.Timeout},
		log, progress, nil, out); err != nil {
		return err
	}
	if j.Recreate {
		t := now()
		gone, err := pruneNodes(ctx, api.Client, c.Machines().All())
		if err != nil {
			return exitcode.With(exitcode.Install, err)
		}
		if len(gone) > 0 {
			fmt.Fprintln(out, pruned(gone, now().Sub(t)))
		}
		t = now()
		end := progress.Start("Moving the pods into the pod CIDRs of the restored Nodes")
		moved, err := repairPodNetworks(ctx, api.Client, shell, &c.Cluster, now)
		end(err)
		if err != nil {
			return exitcode.With(exitcode.Install, err)
		}
		fmt.Fprintf(out, "Pod networks match the restored Nodes: %d pods started again in their node's pod CIDR (%s)\n", moved, now().Sub(t).Round(100*time.Millisecond))
	}
	if err := api.InstallComplete(ctx, c.Nodes(), o.Timeout); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	w := atomicfile.Writer{Root: c.Dir}
	if err := w.Remove(filepath.Join(c.Dir, filepath.FromSlash(installdir.RestoreJournal))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return exitcode.With(exitcode.Install, err)
	}
	fmt.Fprintf(out, "Restore complete: etcd of %s is the backup's of %s on %d masters, every node Ready (%s)\n",
		c.InfraID, m.TakenAt.Format("2006-01-02 15:04:05 UTC"), len(masters), now().Sub(start).Round(time.Second))
	return nil
}

// readBackup checks the archive at path whole, decrypted with the
// identity file's keys when it is encrypted, copying into s what it asks
// for.
func readBackup(path, identity string, s backup.Sinks) (backup.Manifest, error) {
	m, err := backup.ReadFile(path, identity, s)
	if ie := (*backup.IdentityError)(nil); errors.As(err, &ie) {
		return m, err
	} else if err != nil {
		return m, fmt.Errorf("--from: %w", err)
	}
	return m, nil
}

// journal returns the restore under way in c's --dir when it restores the
// same snapshot, else records a new one; either is restored on the first
// master, recorded once the cluster's masters are known.
func journal(c *install.Cluster, m backup.Manifest, masters []string, now time.Time) (Journal, error) {
	j, found, err := Pending(c.Dir)
	if err != nil {
		return j, err
	}
	if found {
		if err := j.sameSnapshot(m, c.Dir); err != nil {
			return j, err
		}
		if j.Seed != "" {
			return j, nil
		}
	} else {
		j = Journal{Run: now.UTC().Format("20060102T150405Z"), Snapshot: m.Snapshot.SHA256}
	}
	if len(masters) == 0 {
		return j, errors.New("the cluster has no master")
	}
	j.Seed = masters[0]
	return j, j.Save(c.Dir)
}

// sameSnapshot refuses to go on with j, the restore under way in dir,
// with another backup than its own, m.
func (j Journal) sameSnapshot(m backup.Manifest, dir string) error {
	if j.Snapshot == m.Snapshot.SHA256 {
		return nil
	}
	return exitcode.With(exitcode.Input, fmt.Errorf("--from: a restore of another backup (restore %s, its snapshot's SHA-256 %s) is under way in %s: run it again with that backup to finish it",
		j.Run, j.Snapshot, dir))
}

// stopOthers has every master of others stop its etcd and API server and
// keep its data aside, all at once; each waits for its kubelet to stop
// the static pods.
func stopOthers(ctx context.Context, shell platforms.NodeShell, c *platforms.Cluster, run string, others []string,
	progress platforms.Progress, out io.Writer, now func() time.Time) error {
	if len(others) == 0 {
		return nil
	}
	t := now()
	end := progress.Start("Stopping etcd and the API server on " + strings.Join(others, ", "))
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outp, err := shell.RunOnNode(ctx, c, name, NodeArgv(run, "", "", "")...)
			if err != nil {
				errs[i] = fmt.Errorf("master %s: %w", name, nodeError(err, outp))
			}
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	end(err)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: etcd and the API server stopped, etcd's data kept aside (%s)\n", strings.Join(others, ", "), now().Sub(t).Round(100*time.Millisecond))
	return nil
}

// putSnapshot copies the snapshot to the master, 0600.
func putSnapshot(ctx context.Context, shell platforms.NodeShell, c *platforms.Cluster, node string, snap *os.File) error {
	if _, err := snap.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := shell.PutNodeFile(ctx, c, node, nodelayout.EtcdRestoreSnapshot, snap, 0o600); err != nil {
		return fmt.Errorf("copy the snapshot: %w", err)
	}
	return nil
}

// NodeArgv is the command a master runs for its part of restore run: with
// snapshot, it restores it as the member name at peerURL.
func NodeArgv(run, snapshot, name, peerURL string) []string {
	argv := []string{nodelayout.KilnBinary, "node", "etcd-restore", "--run=" + run}
	if snapshot != "" {
		argv = append(argv, "--snapshot="+snapshot, "--node-name="+name, "--peer-url="+peerURL)
	}
	return argv
}

// nodeError adds what the node command printed to err.
func nodeError(err error, out []byte) error {
	if len(out) == 0 {
		return err
	}
	return fmt.Errorf("%w\n%s", err, out)
}
