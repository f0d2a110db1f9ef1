// Package install drives `kiln create cluster`, `kiln wait-for`, `kiln
// destroy bootstrap` and `kiln stop|start cluster` (destroy, gather and
// load are package infra's): Create is an ordered list of small phases
// (check the bootstrap credentials, preflight, provision, wait for the API,
// wait for bootstrap-complete, destroy the bootstrap machine, wait for
// install-complete, check the pod network), each a type with a title, the
// kind its failure is reported as (the exit code), and optionally
// ShouldRun. Every phase is idempotent, so re-running create after a
// failure or an interrupt resumes where it stopped. This package is where
// provisioning errors are classified: the platforms' libraries are not.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/ignitionconfigs"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/certs"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/machineset"
	"github.com/kiln-project/kiln/cmd/cluster/waitfor"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// MinBootstrapCredentialLife is how long the bootstrap credentials in the
// Ignition configs must still be valid for a new bootstrap machine: configs
// older than half their 24 h lifetime are refused, as openshift-install does.
const MinBootstrapCredentialLife = 12 * time.Hour

// ErrNoCluster is returned by Load when --dir holds no Ignition configs,
// so no cluster can have been created from it.
var ErrNoCluster = errors.New("no Ignition configs in --dir: run `kiln create cluster` (or `kiln create ignition-configs`) first")

// Timeouts are the flag overrides of install-config's timeouts; zero keeps
// install-config's value or the default.
type Timeouts struct {
	API, Bootstrap, Install time.Duration
}

// Check refuses a negative timeout (an input error naming the flag).
func (t Timeouts) Check() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--api-timeout", t.API}, {"--bootstrap-timeout", t.Bootstrap}, {"--install-timeout", t.Install}} {
		if f.d < 0 {
			return exitcode.With(exitcode.Input, fmt.Errorf("%s %s: a timeout must be positive (0 keeps the default)", f.name, f.d))
		}
	}
	return nil
}

// Cluster is everything the phases need, loaded from --dir's state.
type Cluster struct {
	platforms.Cluster
	// Kubeconfig is the admin kubeconfig in --dir.
	Kubeconfig string
	// TokenExpiry is when the bootstrap credentials expire.
	TokenExpiry time.Time
	// TokenSecret names the install-time bootstrap token's Secret in
	// kube-system, deleted once install-complete is reached.
	TokenSecret string
	Timeouts    Timeouts
}

// Load reads the cluster of dir from its state through store, the
// command's store of dir (the ignition-configs target must have been
// created); flags override install-config's timeouts.
func Load(ctx context.Context, store *graph.Store, dir string, flags Timeouts) (*Cluster, error) {
	ic, cid := &installconfig.InstallConfig{}, &clusterid.ClusterID{}
	boot, master, worker := &ignitionconfigs.Bootstrap{}, &ignitionconfigs.Master{}, &ignitionconfigs.Worker{}
	if found, err := store.FromState(boot); err != nil || !found {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf("%w (in %s)", ErrNoCluster, dir))
	}
	admin, tok := &kubeconfig.Admin{}, &bootstraptoken.BootstrapToken{}
	if err := store.Fetch(ctx, ic, cid, boot, master, worker, admin, tok); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Cluster: platforms.Cluster{
			Dir: abs, Config: ic.Config, InfraID: cid.InfraID,
			Bootstrap: boot.File.Data, Master: master.File.Data, Worker: worker.File.Data,
		},
		Kubeconfig:  filepath.Join(abs, admin.File.Path),
		TokenExpiry: tok.Expiration,
		TokenSecret: tok.Secret().Name,
	}
	if _, err := os.Stat(c.Kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return nil, exitcode.With(exitcode.Input, fmt.Errorf(
			"%s is missing from %s: run `kiln create ignition-configs --dir %s` to write it again", admin.File.Path, dir, dir))
	}
	rec, found, err := machineset.LoadShape(abs)
	if err != nil {
		return nil, exitcode.With(exitcode.Input, err)
	}
	if found {
		c.Shape, c.Releases = rec.Shape, rec.Releases
	}
	if c.Config, err = machineset.EffectiveConfig(abs, c.Config); err != nil {
		return nil, exitcode.With(exitcode.Input, err)
	}
	if c.Resolved, err = ic.Resolved(); err != nil {
		return nil, exitcode.With(exitcode.Input, err)
	}
	if c.Timeouts, err = timeouts(c.Resolved.Timeouts, flags); err != nil {
		return nil, exitcode.With(exitcode.Input, err)
	}
	return c, nil
}

// timeouts returns the install-config's timeouts cfg with the flags'
// overrides.
func timeouts(cfg types.ResolvedTimeouts, flags Timeouts) (Timeouts, error) {
	t := Timeouts{API: cfg.API, Bootstrap: cfg.Bootstrap, Install: cfg.Install}
	if err := flags.Check(); err != nil {
		return t, err
	}
	for _, f := range []struct{ flag, dst *time.Duration }{{&flags.API, &t.API}, {&flags.Bootstrap, &t.Bootstrap}, {&flags.Install, &t.Install}} {
		if *f.flag > 0 {
			*f.dst = *f.flag
		}
	}
	return t, nil
}

// Waits are the milestones the phases wait for on the cluster's API;
// *waitfor.Waiter has them.
type Waits interface {
	API(ctx context.Context, server string, timeout time.Duration) (string, error)
	IsBootstrapComplete(ctx context.Context) bool
	BootstrapComplete(ctx context.Context, timeout time.Duration) error
	InstallComplete(ctx context.Context, nodes int, timeout time.Duration) error
	NetworkCheck(ctx context.Context, p waitfor.Prober, timeout time.Duration) error
}

var _ Waits = (*waitfor.Waiter)(nil)

// API is the cluster's Kubernetes API as the phases wait on it.
type API struct {
	Waits
	// Server is the API's URL, named in messages.
	Server string
	// Client is the admin client, for the changes an install makes itself.
	Client kubernetes.Interface
}

// API returns the cluster's API through the admin kubeconfig. When prov
// (which may be nil) can report its machines' states, the waits never
// count a node whose machine does not run; when it can list failed units
// on its machines, the waits name the first one.
func (c *Cluster) API(log logrus.FieldLogger, progress platforms.Progress, prov platforms.Provisioner) (API, error) {
	dial, err := c.Dialer(prov)
	if err != nil {
		return API{}, err
	}
	rc, err := c.RestConfig(dial)
	if err != nil {
		return API{}, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return API{}, err
	}
	w := &waitfor.Waiter{Client: client, Log: log, Progress: progress, Addons: configs.Addons(c.Config)}
	if ms, ok := prov.(platforms.MachineStater); ok {
		w.Machines = func(ctx context.Context) (map[string]platforms.MachineState, error) {
			return ms.MachineStates(ctx, &c.Cluster)
		}
	}
	if uc, ok := prov.(platforms.UnitChecker); ok {
		w.Units = func(ctx context.Context) ([]platforms.FailedUnit, error) {
			return uc.FailedUnits(ctx, &c.Cluster)
		}
	}
	if ec, ok := prov.(platforms.EndpointChecker); ok {
		w.Endpoint = func(ctx context.Context) string {
			return ec.APIEndpointProblem(ctx, &c.Cluster)
		}
	}
	w.Expired = c.expired()
	if vip := w.Addons.APIVIP; vip != "" {
		if w.VIP, err = vipProbe(rc, dial, vip); err != nil {
			return API{}, err
		}
	}
	return API{Waits: w, Server: rc.Host, Client: client}, nil
}

// vipProbe returns install-complete's check of the API VIP that the
// cluster announces itself: /readyz at vip with the admin's credentials,
// dialed through the cluster's policy and never through the stand-ins that
// dial falls back to.
func vipProbe(rc *rest.Config, dial netroute.Dialer, vip string) (func(context.Context) string, error) {
	at := rest.CopyConfig(rc)
	at.Host = "https://" + net.JoinHostPort(vip, strconv.Itoa(kubeconfig.APIPort))
	dial.Fallback = nil
	at.Dial = dial.DialContext
	client, err := kubernetes.NewForConfig(at)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) string {
		if err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return err.Error()
		}
		return ""
	}, nil
}

// expired returns the waits' check of --dir's certificates (see
// waitfor.Waiter.Expired): the first of the leaf certificates that kiln
// certs renew renews to expire, as the state holds it now; nil when the
// state holds none.
func (c *Cluster) expired() func(time.Time) string {
	first, ok, err := certs.FirstToExpire(c.Dir, kilntls.RenewableIDs())
	if err != nil || !ok {
		return nil
	}
	return func(now time.Time) string {
		if now.Before(first.Cert.NotAfter) {
			return ""
		}
		return fmt.Sprintf("certificate %s expired at %s: run `kiln certs renew --dir %s`",
			first.Name, first.Cert.NotAfter.UTC().Format("2006-01-02 15:04 UTC"), c.Dir)
	}
}

// Dialer returns what every connection of kiln's to c's addresses (its
// API, its machines, etcd on its masters) is opened through: prov's
// policy (platforms.DialPolicy; prov may be nil) decides, before a packet
// is sent, whether a route of the cluster's own leads there. A local
// cluster's API before its bridge exists is "not reachable yet", not a
// connection through the host's default route. Where the platform names
// stand-ins for an API address the cluster announces itself
// (platforms.APIStandIns), a dial of it that does not connect in time
// goes to them.
func (c *Cluster) Dialer(prov platforms.Provisioner) (netroute.Dialer, error) {
	policy, err := platforms.DialPolicy(prov, &c.Cluster)
	if err != nil {
		return netroute.Dialer{}, exitcode.With(exitcode.Input, err)
	}
	d := netroute.Dialer{Policy: policy}
	if s, ok := prov.(platforms.APIStandIns); ok {
		d.Fallback = func(a netip.Addr) []netip.Addr { return s.APIStandIns(&c.Cluster, a) }
	}
	return d, nil
}

// RestConfig returns the admin kubeconfig's client configuration, every
// connection opened through dial.
func (c *Cluster) RestConfig(dial netroute.Dialer) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.Dial = dial.DialContext
	return rc, nil
}

// Nodes is the number of nodes install-complete waits for: the machines of
// the shape a day-2 change recorded, else the install-config's replicas.
func (c *Cluster) Nodes() int { return len(c.Machines().All()) }

// Create is `kiln create cluster` after the Ignition configs exist: the
// whole sequence of an install, then a summary on out. A create resumed
// after bootstrap-complete (learnt once, before any phase runs, from the
// API or from its record in --dir) brings back neither the bootstrap
// machine nor its credential check; its provision phase starts again any
// machine that is stopped.
func Create(ctx context.Context, c *Cluster, prov platforms.Provisioner, api API, log logrus.FieldLogger, out io.Writer) error {
	start := time.Now()
	requireRenewalSince(api, start) // provision may restart stopped machines
	// The API is down after a host reboot: bootstrap-complete is also
	// remembered in --dir.
	c.BootstrapDone = c.bootstrapRecorded() || api.IsBootstrapComplete(ctx)
	if c.BootstrapDone {
		if err := c.recordBootstrap(); err != nil {
			return exitcode.With(exitcode.Internal, err)
		}
	}
	held, late := c.holdsWorkers(), c.provisionsLate()
	// A failing phase exits with its kind's code (docs/exit-codes.md).
	phases := []Phase{
		checkCredentials{c, time.Now}, // input; skipped once bootstrap is done
		preflight{c, prov},            // infrastructure
		provision{c, prov, held},      // infrastructure; no bootstrap machine once bootstrap is done
		waitAPI{c, api, exitcode.Bootstrap},
		waitBootstrapComplete{c, api},   // bootstrap
		destroyBootstrap{c, prov},       // infrastructure
		provisionWorkers{c, prov, late}, // infrastructure; only when provision held workers back
		waitInstallComplete{c, api},     // install
		checkPodNetwork{c, api, prov},   // install; only on platforms whose nodes run kiln's probe
		retireJoinToken{c, api},         // install
	}
	if err := Run(ctx, log, phases); err != nil {
		return err
	}
	c.WriteComplete(out)
	fmt.Fprintf(out, "Time elapsed: %s\n", time.Since(start).Round(time.Second))
	return nil
}

// WriteComplete tells the user on out that the install is complete and how
// to log in: with the admin kubeconfig, the only login kiln creates (it
// runs no OAuth server, so there is no password); and, when the cluster
// has an image registry, where to push images.
func (c *Cluster) WriteComplete(out io.Writer) {
	fmt.Fprintf(out, "Install complete!\n")
	fmt.Fprintf(out, "To access the cluster as the system:admin user: export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Fprintf(out, "That admin kubeconfig is the cluster's only login (there is no password): keep it private.\n")
	if r, ok := configs.ImageRegistry(c.Config); ok {
		fmt.Fprintf(out, "Image registry: push to %s from this host (plain HTTP, e.g. docker push %s/app:v1); pods pull the same names.\n", r.Name, r.Name)
	}
}

// WaitForBootstrapComplete is `kiln wait-for bootstrap-complete`: create's
// waits up to the bootstrap machine's removal.
func WaitForBootstrapComplete(ctx context.Context, c *Cluster, api API, log logrus.FieldLogger) error {
	return Run(ctx, log, []Phase{waitAPI{c, api, exitcode.Bootstrap}, waitBootstrapComplete{c, api}})
}

// WaitForInstallComplete is `kiln wait-for install-complete`.
func WaitForInstallComplete(ctx context.Context, c *Cluster, api API, log logrus.FieldLogger) error {
	return Run(ctx, log, []Phase{waitInstallComplete{c, api}, retireJoinToken{c, api}})
}

// DestroyBootstrap is `kiln destroy bootstrap`: create's phase of the same
// name on its own.
func DestroyBootstrap(ctx context.Context, c *Cluster, prov platforms.Provisioner, log logrus.FieldLogger) error {
	return Run(ctx, log, []Phase{destroyBootstrap{c, prov}})
}

// checkCredentials refuses Ignition configs whose bootstrap credentials
// expire too soon for a bootstrap machine to still come up with them.
func (c *Cluster) checkCredentials(now time.Time) error {
	left := c.TokenExpiry.Sub(now)
	if left >= MinBootstrapCredentialLife {
		return nil
	}
	return fmt.Errorf(
		"the Ignition configs in %s are too old: their bootstrap credentials expire at %s (%s left; at least %s are needed). "+
			"Create them again in a new directory (kiln create ignition-configs), or run `kiln destroy cluster` here first",
		c.Dir, c.TokenExpiry.Format(time.RFC3339), left.Round(time.Minute), MinBootstrapCredentialLife)
}
