package platforms

import (
	"context"
	"io"
	"io/fs"
	"net/netip"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/platforms/netroute"
)

// Cluster is what provisioning needs from the assets.
type Cluster struct {
	// Dir is the cluster's --dir (Terraform state lives under it).
	Dir string
	// Config is the effective install-config.
	Config *types.Config
	// Resolved is Config's values resolved once (types.Config.Resolve):
	// the release, the networks, the timeouts.
	Resolved types.Resolved
	// InfraID prefixes every piece of infrastructure.
	InfraID string
	// Ignition configs of the three roles.
	Bootstrap, Master, Worker []byte
	// BootstrapDone is set once bootstrap-complete was recorded: a resumed
	// create must not bring the bootstrap machine back.
	BootstrapDone bool
	// Shape names the masters and workers the cluster runs. Zero until a
	// day-2 change recorded one: then Machines derives it from the
	// install-config's replica counts.
	Shape machines.Shape
	// Full is the complete Ignition config of a machine joining a running
	// cluster, by role ("master", "worker"); a role without one boots from
	// its pointer config. A machine added on day 2 boots from its full
	// config, which carries a join token of its own.
	Full map[string][]byte
	// Releases maps a machine to the Kubernetes release it boots when that
	// is not Resolved.Release: a machine kiln scale added to a cluster
	// upgraded since it was created boots straight into the release the
	// cluster runs (local: that release's node image; ssh: its system
	// extension). A machine it does not name boots the install-config's.
	Releases map[string]string
}

// ReleaseOf is the Kubernetes release machine boots: its entry in
// Releases, else the install-config's.
func (c *Cluster) ReleaseOf(machine string) string {
	if v := c.Releases[machine]; v != "" {
		return v
	}
	return c.Resolved.Release.Kubernetes
}

// Machines returns the names of the cluster's masters and workers: Shape
// when set, else the install-config's (configs.Shape: the platform's
// names, or <infraID>-master-<i> and <infraID>-worker-<i> for the replica
// counts).
func (c *Cluster) Machines() machines.Shape {
	if len(c.Shape.Masters) > 0 {
		return c.Shape
	}
	return configs.Shape(c.Config, c.InfraID)
}

// Env is what a provisioner reports to and caches in.
type Env struct {
	Log      logrus.FieldLogger
	Progress Progress
	// CacheDir is kiln's cache (node images, built engines).
	CacheDir string
	// Kiln is the path of the running kiln binary.
	Kiln string
}

// Provisioner creates and destroys a platform's infrastructure. Every
// method is idempotent: a create that failed or was interrupted resumes when
// run again, and a destroy of something already gone succeeds.
type Provisioner interface {
	// Preflight checks that the platform can host c and says what it will
	// change; it changes nothing.
	Preflight(ctx context.Context, c *Cluster) error
	// Provision creates the whole infrastructure, bootstrap machine included.
	Provision(ctx context.Context, c *Cluster) error
	// DestroyBootstrap takes the bootstrap machine out of the load balancer
	// and destroys it.
	DestroyBootstrap(ctx context.Context, c *Cluster) error
	// Destroy removes everything of infraID: what Terraform state in dir
	// records, then anything left that is named after infraID.
	Destroy(ctx context.Context, dir, infraID string) error
}

// ImageLoader is an optional ability of a Provisioner: importing container
// images into the nodes' container runtime, for clusters that cannot pull
// (the local platform's machines have no route beyond the host).
type ImageLoader interface {
	// LoadImageArchive imports the docker or OCI image archive at path (a
	// file on the host running kiln) into the container runtime of the
	// named nodes of infraID, or of every node when nodes is empty.
	LoadImageArchive(ctx context.Context, infraID, path string, nodes []string) error
}

// Upgrader is an optional ability of a Provisioner: delivering the node
// payload of a Kubernetes release to a cluster's machines, for kiln
// upgrade cluster. It changes nothing a node runs: the node's
// machine-config agent does, from the payload, when its Node's
// kiln.dev/desired-release asks for it. Releases are named by their
// Kubernetes version ("v1.36.3", one of release.Versions); nodes by their
// machine's name. Every method is idempotent.
type Upgrader interface {
	// PrepareRelease makes the node payload of release version ready on
	// the host running kiln (the local platform builds or reuses the
	// release's node image, the ssh platform also its system extension),
	// before the first node changes.
	PrepareRelease(ctx context.Context, c *Cluster, version string) error
	// StageRelease puts the node payload of release version on c's node
	// at nodelayout.ReleasesDir/<version> (the tree of the ssh platform's
	// extension: nodelayout.PayloadKubelet, nodelayout.PayloadImagesDir),
	// whole or not at all. A node that has it already, staged or merged,
	// is left as it is.
	StageRelease(ctx context.Context, c *Cluster, node, version string) error
}

// NodeShell is an optional ability of a Provisioner: reaching a running
// machine of a cluster without the cluster's API, which a recovery needs
// when the API is down (kiln restore cluster, kiln certs renew). Nodes are
// named by their machine's name.
type NodeShell interface {
	// PutNodeFile replaces path on c's node with what src holds,
	// following no link.
	PutNodeFile(ctx context.Context, c *Cluster, node, path string, src io.Reader, mode fs.FileMode) error
	// RunOnNode runs argv as root on c's node and returns its standard
	// output; a failed command's error holds its standard error.
	RunOnNode(ctx context.Context, c *Cluster, node string, argv ...string) ([]byte, error)
}

// Gatherer collects diagnostics from a cluster's machines.
type Gatherer interface {
	// Gather writes the logs of the bootstrap machine and the masters of
	// the cluster infraID, whose --dir is clusterDir, into dir (one
	// sub-directory per machine).
	Gather(ctx context.Context, clusterDir, infraID, dir string) error
}

// ConfigError is a problem in the install-config that only a provisioner
// finds, such as a machine network with no room for every machine. The user
// fixes it in install-config.yaml, so commands report it as bad input.
type ConfigError struct {
	Err error
}

// Error returns the message of the wrapped error.
func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ConfigError) Unwrap() error { return e.Err }

// MachineStater reports whether a cluster's machines run. The waits on the
// API count a node as up only when its machine runs, so a dead machine is
// never trusted on its Node's stale Ready condition.
type MachineStater interface {
	// MachineStates returns the state of each master and worker machine
	// of c, keyed by the name its node registers as.
	MachineStates(ctx context.Context, c *Cluster) (map[string]MachineState, error)
}

// Restarter stops a whole cluster and starts it again, keeping every
// machine's disk: its data and identity.
type Restarter interface {
	// Stop shuts the cluster down cleanly: workers first, then the masters
	// one at a time, then what serves the API.
	Stop(ctx context.Context, c *Cluster) error
	// Start brings back every stopped machine and service of the cluster
	// (after a stop, a crash or a host reboot) as it was last provisioned.
	Start(ctx context.Context, c *Cluster) error
}

// FailedUnit is a systemd unit that failed on one of a cluster's machines.
type FailedUnit struct {
	// Machine is the machine's name.
	Machine string
	// Unit is the unit's name, such as kubelet.service.
	Unit string
	// LastLine is the last line the unit wrote to the journal ("" when
	// none could be read). It may contain anything: show it truncated,
	// never log it in full.
	LastLine string
}

// UnitChecker reports the failed systemd units on a cluster's running
// machines, so the waits on the API can say why a machine's part of the
// cluster does not come up.
type UnitChecker interface {
	// FailedUnits returns the failed units of c's running machines (the
	// bootstrap machine, masters and workers), sorted by machine and
	// unit. A machine that cannot be asked is left out.
	FailedUnits(ctx context.Context, c *Cluster) ([]FailedUnit, error)
}

// EndpointChecker reports why a cluster's API endpoint serves no client,
// so the waits on the API can name it instead of the clients' EOF.
type EndpointChecker interface {
	// APIEndpointProblem returns what keeps c's API endpoint from
	// passing connections to any API server (its load balancer is not
	// running, no backend passes its health check, with each one's last
	// error), or "" when nothing is known to be wrong.
	APIEndpointProblem(ctx context.Context, c *Cluster) string
}

// Scaler is an optional ability of a Provisioner: changing the machines of
// a running cluster (kiln scale cluster). The caller orders the steps that
// keep etcd and the API available; each method only converges the
// platform to what it is given, and is idempotent.
type Scaler interface {
	// ApplyMachines makes the cluster's machines exactly those of
	// c.Shape: it creates the missing ones (a master with c.Full's master
	// config) and destroys the others. Running machines are kept as they
	// are.
	ApplyMachines(ctx context.Context, c *Cluster) error
	// SetAPIBackends points the API load balancer (and the machine-config
	// server's) at exactly masters.
	SetAPIBackends(ctx context.Context, c *Cluster, masters []string) error
	// APIBackends returns the masters the API load balancer sends to.
	APIBackends(ctx context.Context, c *Cluster) ([]string, error)
}

// Router is an optional ability of a Provisioner: the policy that every
// dial of kiln's to an address of c (its API, machines, etcd) passes
// before a packet is sent, so that none leaves through a route that is not
// the cluster's (docs/security.md, "Addresses kiln dials").
type Router interface {
	// DialPolicy returns the policy of c's addresses.
	DialPolicy(c *Cluster) (netroute.Policy, error)
}

// APIStandIns is an optional ability of a Provisioner whose cluster
// announces its API address itself (ssh's apiVIP that kiln keeps, which
// only a running cluster announces): the addresses that serve the same
// API in its place, the masters', so that kiln's own clients reach the API
// while the VIP is not announced (an install before MetalLB runs, a
// restore, a failover). TLS still verifies the VIP's name.
type APIStandIns interface {
	// APIStandIns returns the addresses that serve c's API in addr's
	// place; nil when addr is not such an address.
	APIStandIns(c *Cluster, addr netip.Addr) []netip.Addr
}

// DialPolicy returns prov's policy for c's addresses when prov is a
// Router (prov may be nil), else netroute.Anywhere: a platform without
// one reaches its addresses through the user's own routes.
func DialPolicy(prov Provisioner, c *Cluster) (netroute.Policy, error) {
	if r, ok := prov.(Router); ok {
		return r.DialPolicy(c)
	}
	return netroute.Anywhere{}, nil
}
