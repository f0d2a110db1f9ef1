package install

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/cluster/waitfor"
	"github.com/kiln-project/kiln/platforms"
)

// The phases of an install, in the order Create runs them. Each names the
// kind its failure is reported as.
var (
	_ Conditional = checkCredentials{}
	_ Phase       = preflight{}
	_ Phase       = provision{}
	_ Phase       = waitAPI{}
	_ Phase       = waitBootstrapComplete{}
	_ Phase       = destroyBootstrap{}
	_ Conditional = provisionWorkers{}
	_ Phase       = waitInstallComplete{}
	_ Conditional = checkPodNetwork{}
	_ Phase       = retireJoinToken{}
)

// checkCredentials refuses Ignition configs whose bootstrap credentials
// expire too soon for a new bootstrap machine. A create resumed after
// bootstrap-complete has no bootstrap machine to bring up, so it skips the
// check.
type checkCredentials struct {
	c   *Cluster
	now func() time.Time
}

func (checkCredentials) Title() string       { return "check the bootstrap credentials" }
func (checkCredentials) Kind() exitcode.Kind { return exitcode.Input }
func (p checkCredentials) ShouldRun(context.Context) (bool, error) {
	return !p.c.BootstrapDone, nil
}
func (p checkCredentials) Run(context.Context) error { return p.c.checkCredentials(p.now()) }

// preflight checks that the platform can host the cluster.
type preflight struct {
	c    *Cluster
	prov platforms.Provisioner
}

func (preflight) Title() string                   { return "preflight" }
func (preflight) Kind() exitcode.Kind             { return exitcode.Infrastructure }
func (p preflight) Run(ctx context.Context) error { return p.prov.Preflight(ctx, &p.c.Cluster) }

// provision creates the infrastructure; the bootstrap machine only while
// bootstrap-complete is not recorded (Cluster.BootstrapDone), and no
// worker when held (what Cluster.holdsWorkers said when the create began).
type provision struct {
	c    *Cluster
	prov platforms.Provisioner
	held bool
}

func (provision) Title() string       { return "provision" }
func (provision) Kind() exitcode.Kind { return exitcode.Infrastructure }
func (p provision) Run(ctx context.Context) error {
	if p.held {
		return p.prov.Provision(ctx, p.c.mastersOnly())
	}
	return p.prov.Provision(ctx, &p.c.Cluster)
}

// provisionWorkers creates the workers that provision held back, once the
// bootstrap machine is gone: the same provisioning, now with every machine
// and without the bootstrap machine (the ssh platform's bootstrap host,
// reset, joins as a worker here when it has joinAsWorker). late is what
// Cluster.provisionsLate said when the create began.
type provisionWorkers struct {
	c    *Cluster
	prov platforms.Provisioner
	late bool
}

func (provisionWorkers) Title() string       { return "create the workers held back during bootstrap" }
func (provisionWorkers) Kind() exitcode.Kind { return exitcode.Infrastructure }
func (p provisionWorkers) ShouldRun(context.Context) (bool, error) {
	return p.late, nil
}
func (p provisionWorkers) Run(ctx context.Context) error {
	p.c.BootstrapDone = true // bootstrap-complete was waited for and recorded
	return p.prov.Provision(ctx, &p.c.Cluster)
}

// waitAPI waits for the Kubernetes API to answer. Its failure is of kind:
// a bootstrap failure while installing, an install failure for a cluster
// that was installed already (start).
type waitAPI struct {
	c    *Cluster
	api  API
	kind exitcode.Kind
}

func (waitAPI) Title() string         { return "wait for the API" }
func (p waitAPI) Kind() exitcode.Kind { return p.kind }
func (p waitAPI) Run(ctx context.Context) error {
	_, err := p.api.Waits.API(ctx, p.api.Server, p.c.Timeouts.API)
	return err
}

// waitBootstrapComplete waits for bootkube's bootstrap-complete record.
type waitBootstrapComplete struct {
	c   *Cluster
	api API
}

func (waitBootstrapComplete) Title() string       { return "wait for bootstrap-complete" }
func (waitBootstrapComplete) Kind() exitcode.Kind { return exitcode.Bootstrap }
func (p waitBootstrapComplete) Run(ctx context.Context) error {
	if err := p.api.BootstrapComplete(ctx, p.c.Timeouts.Bootstrap); err != nil {
		return err
	}
	return p.c.recordBootstrap()
}

// destroyBootstrap takes the bootstrap machine out of the load balancer and
// destroys it; with no bootstrap machine left it does nothing.
type destroyBootstrap struct {
	c    *Cluster
	prov platforms.Provisioner
}

func (destroyBootstrap) Title() string       { return "destroy the bootstrap machine" }
func (destroyBootstrap) Kind() exitcode.Kind { return exitcode.Infrastructure }
func (p destroyBootstrap) Run(ctx context.Context) error {
	return p.prov.DestroyBootstrap(ctx, &p.c.Cluster)
}

// waitInstallComplete waits for every node Ready and the cluster add-ons.
type waitInstallComplete struct {
	c   *Cluster
	api API
}

func (waitInstallComplete) Title() string       { return "wait for install-complete" }
func (waitInstallComplete) Kind() exitcode.Kind { return exitcode.Install }
func (p waitInstallComplete) Run(ctx context.Context) error {
	return p.api.InstallComplete(ctx, p.c.Nodes(), p.c.Timeouts.Install)
}

// checkPodNetwork proves cluster DNS and a ClusterIP Service from a pod, on
// platforms whose nodes can run kiln's probe (waitfor.Prober).
type checkPodNetwork struct {
	c    *Cluster
	api  API
	prov platforms.Provisioner
}

func (checkPodNetwork) Title() string       { return "check the pod network" }
func (checkPodNetwork) Kind() exitcode.Kind { return exitcode.Install }
func (p checkPodNetwork) ShouldRun(context.Context) (bool, error) {
	_, ok := p.prov.(waitfor.Prober)
	return ok, nil
}
func (p checkPodNetwork) Run(ctx context.Context) error {
	return p.api.NetworkCheck(ctx, p.prov.(waitfor.Prober), p.c.Timeouts.Install)
}

// retireJoinToken deletes the install-time bootstrap token once every node
// has joined: the worker config the masters serve carries it, and with it
// a kubelet can ask for a client certificate under any node name. Day-2
// joins get a token of their own (kiln scale cluster).
type retireJoinToken struct {
	c   *Cluster
	api API
}

func (retireJoinToken) Title() string       { return "retire the install-time join token" }
func (retireJoinToken) Kind() exitcode.Kind { return exitcode.Install }
func (p retireJoinToken) Run(ctx context.Context) error {
	err := p.api.Client.CoreV1().Secrets(bootstraptoken.SecretNamespace).Delete(ctx, p.c.TokenSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the install-time join token (Secret %s/%s): %w", bootstraptoken.SecretNamespace, p.c.TokenSecret, err)
	}
	return nil
}
