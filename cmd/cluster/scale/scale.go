package scale

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/ignitionconfigs"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh/sshconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/release"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/install"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// Options are the flags of kiln scale cluster.
type Options struct {
	// Config is an edited install-config whose replica counts are wanted;
	// "" uses Masters and Workers.
	Config string
	// Masters and Workers are the counts wanted; -1 keeps the current one.
	Masters, Workers int
	Remove, Replace  []string
	// PlanOnly prints the plan and changes nothing.
	PlanOnly bool
	// Yes skips the confirmation.
	Yes   bool
	Force bool
	// DrainTimeout bounds each worker's drain; JoinTimeout each join.
	DrainTimeout, JoinTimeout time.Duration
}

// Scale is kiln scale cluster: plan the change of c's machines, print the
// plan, ask (unless o.Yes) and carry it out.
func Scale(ctx context.Context, c *install.Cluster, prov platforms.Provisioner, o Options, log logrus.FieldLogger,
	progress platforms.Progress, in io.Reader, out io.Writer) error {
	scaler, ok := prov.(platforms.Scaler)
	if !ok {
		return exitcode.With(exitcode.Input, fmt.Errorf("platform %s cannot add or remove machines", c.Config.PlatformName()))
	}
	dial, err := c.Dialer(prov)
	if err != nil {
		return err
	}
	r, err := newRunner(ctx, c, scaler, dial, o, log, progress, out)
	if err != nil {
		return err
	}
	rec, _, err := machineset.LoadShape(c.Dir)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	req, err := request(c, o, rec.Removing)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	cur := c.Machines()
	unjoined, err := r.Unjoined(ctx, cur)
	if err != nil {
		return exitcode.With(exitcode.Install, fmt.Errorf("read the cluster's etcd members: %w", err))
	}
	for n := range rec.Joining {
		unjoined = append(unjoined, n)
	}
	plan, err := MakePlan(c.InfraID, cur, req, rec.Removing, unjoined)
	if err != nil {
		return exitcode.With(exitcode.Input, err)
	}
	plan.Print(out)
	if plan.Empty() || o.PlanOnly {
		return nil
	}
	// during is the install-config while the plan runs: on ssh, with the
	// hosts before and after.
	during := c.Config
	if req.Hosts != nil {
		during = sshconfig.WithHosts(c.Config, unionHosts(c.Config.Platform.SSH.Hosts, req.Hosts))
	}
	if plan.Creates() {
		// The machines to create are checked before anything changes (a
		// platform's preflight skips what runs already).
		after := c.Cluster
		after.Config, after.Shape, after.BootstrapDone = during, plan.To, true
		if err := prov.Preflight(ctx, &after); err != nil {
			return exitcode.With(exitcode.Infrastructure, err)
		}
	}
	if o.Force {
		fmt.Fprintln(out, "--force: a master removal may leave an even etcd member count or go ahead without a healthy majority; "+
			strings.TrimPrefix(ForceOverrides, "--force: "))
	}
	if !o.Yes {
		if err := Confirm(in, out); err != nil {
			return exitcode.With(exitcode.Input, err)
		}
	}
	if req.Hosts != nil {
		// The hosts before and after, until the scale is done: a host
		// being removed is reset by name, a host added installed by its
		// entry.
		if err := machineset.SaveHosts(c.Dir, during.Platform.SSH.Hosts); err != nil {
			return exitcode.With(exitcode.Install, err)
		}
		c.Config = during
	}
	if err := r.Run(ctx, plan); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	return exitcode.With(exitcode.Install, settleHosts(c))
}

// settleHosts brings the hosts record of c, a cluster on the ssh platform
// whose scale is done, down to the hosts it runs on: the bootstrap host's
// entry, joining as a worker when its shape has it, and the hosts of its
// shape. A cluster without a record (no scale changed its hosts) keeps
// none.
func settleHosts(c *install.Cluster) error {
	if c.Config.Platform.SSH == nil {
		return nil
	}
	if _, found, err := machineset.LoadHosts(c.Dir); err != nil || !found {
		return err
	}
	shape := c.Machines().All()
	hosts := slices.DeleteFunc(slices.Clone(c.Config.Platform.SSH.Hosts), func(h ssh.Host) bool {
		return h.Role != ssh.RoleBootstrap && !slices.Contains(shape, h.Name)
	})
	for i, h := range hosts {
		if h.Role == ssh.RoleBootstrap {
			hosts[i].JoinAsWorker = slices.Contains(shape, h.Name)
		}
	}
	if err := machineset.SaveHosts(c.Dir, hosts); err != nil {
		return err
	}
	c.Config = sshconfig.WithHosts(c.Config, hosts)
	return nil
}

// ErrNotConfirmed is returned when the user does not answer yes.
var ErrNotConfirmed = errors.New("cancelled: the answer was not yes")

// Confirm asks for "yes" on in before a plan is applied (kiln scale
// cluster, kiln upgrade cluster); a reader that is not a terminal must be
// answered with --yes.
func Confirm(in io.Reader, out io.Writer) error {
	if f, ok := in.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			return errors.New("standard input is not a terminal: pass --yes to apply the plan")
		}
	}
	fmt.Fprint(out, "Apply this plan? Only 'yes' will be accepted: ")
	line, _ := bufio.NewReader(in).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return ErrNotConfirmed
	}
	return nil
}

// request is the wanted shape from o: an edited install-config, or flags;
// a count neither sets is the current one less the removals under way
// (pending), so a bare re-run finishes an interrupted shrink.
func request(c *install.Cluster, o Options, pending []string) (Request, error) {
	cur := c.Machines()
	left := func(names []string) int {
		return len(slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(pending, n) }))
	}
	req := Request{Masters: left(cur.Masters), Workers: left(cur.Workers), Remove: o.Remove, Replace: o.Replace, Force: o.Force}
	named := c.Config.Platform.SSH != nil
	if named {
		var flags []string
		for _, f := range []struct {
			name string
			set  bool
		}{{"--masters", o.Masters >= 0}, {"--workers", o.Workers >= 0}, {"--remove", len(o.Remove) > 0}} {
			if f.set {
				flags = append(flags, f.name)
			}
		}
		if len(flags) > 0 {
			return req, fmt.Errorf("%s: on platform ssh the hosts are the machines: list the ones wanted in platform.ssh.hosts of --config (kiln show install-config, edited)",
				strings.Join(flags, ", "))
		}
	}
	if o.Config != "" {
		data, err := os.ReadFile(o.Config)
		if err != nil {
			return req, err
		}
		want, err := installconfig.ParseDefaulted(data)
		if err != nil {
			return req, fmt.Errorf("%s: %w", o.Config, err)
		}
		if req.Masters, req.Workers, err = Counts(c.Config, want); err != nil {
			return req, fmt.Errorf("%s: %w", o.Config, err)
		}
		if named {
			shape := configs.Shape(want, c.InfraID)
			req.Want, req.Hosts = &shape, want.Platform.SSH.Hosts
		}
	}
	if o.Masters >= 0 {
		req.Masters = o.Masters
	}
	if o.Workers >= 0 {
		req.Workers = o.Workers
	}
	return req, nil
}

// newRunner loads what a scale needs from --dir's state: the etcd CA and a
// client certificate, the masters' etcd static pod and full config, and
// the bootstrap token.
func newRunner(ctx context.Context, c *install.Cluster, scaler platforms.Scaler, dial netroute.Dialer, o Options, log logrus.FieldLogger,
	progress platforms.Progress, out io.Writer) (*Runner, error) {
	store, err := graph.Open(c.Dir, graph.WithLogger(log))
	if err != nil {
		return nil, err
	}
	ca, client, pods := &kilntls.EtcdCA{}, &kilntls.APIServerEtcdClient{}, &manifests.MasterStaticPods{}
	master, worker := &ignitionconfigs.MasterConfig{}, &ignitionconfigs.WorkerConfig{}
	for _, a := range []graph.Asset{ca, client, pods, master, worker} {
		if found, err := store.FromState(a); err != nil || !found {
			return nil, exitcode.With(exitcode.Input, fmt.Errorf("%s is not in the state of %s: %v", a.Name(), c.Dir, err))
		}
	}
	validity, err := kilntls.LeafValidityOf(store)
	if err != nil {
		return nil, exitcode.With(exitcode.Input, err)
	}
	var manifest string
	for _, f := range pods.Files() {
		if filepath.Base(f.Path) == etcdmembers.ManifestFile {
			manifest = string(f.Data)
		}
	}
	if !strings.Contains(manifest, manifests.EtcdInitialClusterMarker) {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf("the masters' etcd static pod in the state has no %s", manifests.EtcdInitialClusterMarker))
	}
	rc, err := c.RestConfig(dial)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	rec, _, err := machineset.LoadShape(c.Dir)
	if err != nil {
		return nil, exitcode.With(exitcode.Input, err)
	}
	r := &Runner{
		Cluster:  &c.Cluster,
		Machines: scaler,
		Kube:     kube,
		Rest:     rc,
		Etcd: func(endpoints []string) (Etcd, error) {
			return etcdmembers.DialPEM(endpoints, ca.Cert, client.Cert, client.Key, dial.DialContext)
		},
		PKI:            EtcdPKI{CA: &ca.CertKey, Client: &client.CertKey, Manifest: manifest, Validity: validity},
		Configs:        map[string][]byte{machines.RoleMaster: master.Config, machines.RoleWorker: worker.Config},
		Joining:        rec.Joining,
		InstallerImage: release.PauseImage(),
		Force:          o.Force,
		JoinTimeout:    o.JoinTimeout,
		Log:            log,
		Progress:       progress,
		Out:            out,
	}
	d := &Drainer{Client: kube, Timeout: o.DrainTimeout, Force: o.Force, Log: log}
	r.Drain = d.Drain
	return r, nil
}
