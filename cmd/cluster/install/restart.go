package install

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
)

// bootstrapRecorded reports whether bootstrap-complete was recorded in --dir.
func (c *Cluster) bootstrapRecorded() bool {
	_, err := os.Stat(filepath.Join(c.Dir, filepath.FromSlash(installdir.BootstrapRecord)))
	return err == nil
}

// recordBootstrap records bootstrap-complete in --dir.
func (c *Cluster) recordBootstrap() error {
	if c.Dir == "" || c.bootstrapRecorded() {
		return nil
	}
	w := &atomicfile.Writer{Root: c.Dir}
	return w.Write(filepath.Join(c.Dir, filepath.FromSlash(installdir.BootstrapRecord)), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// restarter returns prov as a platforms.Restarter, or an input error for a
// platform whose clusters kiln cannot stop and start.
func restarter(c *Cluster, prov platforms.Provisioner) (platforms.Restarter, error) {
	r, ok := prov.(platforms.Restarter)
	if !ok {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf("platform %s: kiln cannot stop or start its machines", c.Config.PlatformName()))
	}
	return r, nil
}

// Stop is `kiln stop cluster`: a clean shutdown of every machine, keeping
// their disks, and of the API load balancer.
func Stop(ctx context.Context, c *Cluster, prov platforms.Provisioner, log logrus.FieldLogger, out io.Writer) error {
	r, err := restarter(c, prov)
	if err != nil {
		return err
	}
	if err := Run(ctx, log, []Phase{stopCluster{c, r}}); err != nil {
		return err
	}
	fmt.Fprintf(out, "Cluster %s stopped; start it again with: kiln start cluster --dir %s\n", c.InfraID, c.Dir)
	return nil
}

// Start is `kiln start cluster`: bring back every stopped machine and the
// load balancer (after a stop, a crash or a host reboot), then wait until
// the API answers and every node is up again.
func Start(ctx context.Context, c *Cluster, prov platforms.Provisioner, api API, log logrus.FieldLogger, out io.Writer) error {
	start := time.Now()
	r, err := restarter(c, prov)
	if err != nil {
		return err
	}
	requireRenewalSince(api, start)
	phases := []Phase{
		startCluster{c, r}, // infrastructure
		waitAPI{c, api, exitcode.Install},
		waitInstallComplete{c, api}, // install
	}
	if err := Run(ctx, log, phases); err != nil {
		return err
	}
	fmt.Fprintf(out, "Cluster %s started: %d nodes Ready\n", c.InfraID, c.Nodes())
	fmt.Fprintf(out, "Time elapsed: %s\n", time.Since(start).Round(time.Second))
	return nil
}

// stopCluster stops the cluster's machines and load balancer.
type stopCluster struct {
	c *Cluster
	r platforms.Restarter
}

func (stopCluster) Title() string                   { return "stop the cluster" }
func (stopCluster) Kind() exitcode.Kind             { return exitcode.Infrastructure }
func (p stopCluster) Run(ctx context.Context) error { return p.r.Stop(ctx, &p.c.Cluster) }

// startCluster starts the cluster's stopped machines and load balancer.
type startCluster struct {
	c *Cluster
	r platforms.Restarter
}

func (startCluster) Title() string                   { return "start the cluster" }
func (startCluster) Kind() exitcode.Kind             { return exitcode.Infrastructure }
func (p startCluster) Run(ctx context.Context) error { return p.r.Start(ctx, &p.c.Cluster) }

// requireRenewalSince makes the waits of api (when they can) count a node
// only once its kubelet renewed its Lease after t: machines restarted by
// this run are up only when their new kubelet runs.
func requireRenewalSince(api API, t time.Time) {
	if w, ok := api.Waits.(interface{ RequireRenewalSince(time.Time) }); ok {
		w.RequireRenewalSince(t)
	}
}
