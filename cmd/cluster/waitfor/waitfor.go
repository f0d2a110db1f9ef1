// Package waitfor waits for the milestones of an install through the
// Kubernetes API: the API answering, bootstrap-complete (the handover from
// the bootstrap machine) and install-complete (every node Ready, cluster DNS,
// the service proxy and the cluster's add-ons running). Each wait reports
// what it waits for, what it has seen and how long it has left.
package waitfor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/platforms"
)

// Names shared with bootkube, which writes the bootstrap ConfigMap and runs
// the etcd installer pods.
const (
	bootstrapNamespace = handover.CompleteNamespace
	bootstrapConfigMap = handover.CompleteConfigMap
	installerNamespace = handover.SystemNamespace
	installerLabel     = handover.InstallerSelector
	controlPlaneLabel  = handover.ControlPlaneLabel
)

// updateEvery is how often a wait repeats an unchanged state.
const updateEvery = 30 * time.Second

// Waiter waits on one cluster.
type Waiter struct {
	Client   kubernetes.Interface
	Log      logrus.FieldLogger
	Progress platforms.Progress
	// Poll is the interval between checks (default 2s).
	Poll time.Duration
	// Addons are the add-ons install-complete waits for besides DNS and
	// the service proxy.
	Addons types.Addons
	// Machines, when the platform can tell, reports whether each node's
	// machine runs: a node whose machine does not run is never counted
	// as up, whatever its Node object says.
	Machines MachineStates
	// Units, when the platform can tell, reports failed systemd units on
	// the cluster's machines: the waits name the first one.
	Units FailedUnits
	// Expired, when set, names the certificate of --dir that the API needs
	// and that has expired at now ("" when none has): no wait can end
	// then, and the waits name it before any other problem.
	Expired func(now time.Time) string
	// Endpoint, when the platform can tell, says why the API endpoint
	// serves no client ("" when nothing is known to be wrong): the waits
	// name it before any other problem.
	Endpoint func(ctx context.Context) string
	// VIP, when set, says why the API VIP that the cluster announces
	// itself (Addons.APIVIP) does not answer /readyz ("" when it does):
	// install-complete waits for it.
	VIP func(ctx context.Context) string
	// Now is the clock the waits judge ages by: a node's lease, a pod
	// stuck in creation (nil is time.Now).
	Now func() time.Time
	// since, when set, is when the machines may last have been (re)started:
	// a lease renewed before it proves nothing about today's kubelet.
	since time.Time
}

// now reads the waits' clock.
func (w *Waiter) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

// RequireRenewalSince makes InstallComplete count a node only once its
// kubelet renewed its Lease after t: a machine restarted since t is up
// only when its new kubelet runs, even if its old lease is still fresh.
func (w *Waiter) RequireRenewalSince(t time.Time) { w.since = t }

// API waits until the API server answers /readyz and returns its version.
// Its state line names the first thing in the way: the API endpoint
// serving no client, a failed unit on a machine.
func (w *Waiter) API(ctx context.Context, server string, timeout time.Duration) (string, error) {
	end := w.Progress.Start(fmt.Sprintf("Waiting up to %s for the Kubernetes API at %s", timeout, server))
	var version string
	diag := w.newDiagnosis(false)
	diag.noPods = true
	err := w.until(ctx, timeout, diag.wrap(func(ctx context.Context) (bool, string, error) {
		if err := w.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return false, "API not ready: " + shorten(err), nil
		}
		v, err := w.Client.Discovery().ServerVersion()
		if err != nil {
			return false, "API not ready: " + shorten(err), nil
		}
		version = v.GitVersion
		return true, "", nil
	}))
	end(err)
	if err != nil {
		return "", fmt.Errorf("the Kubernetes API at %s did not answer: %w", server, err)
	}
	w.Log.Infof("API %s up", version)
	return version, nil
}

// BootstrapComplete waits for bootkube's bootstrap-complete record, telling
// the user about nodes registering and etcd members joining meanwhile. Its
// state line (and its timeout error) names the first thing in the way: a
// stopped machine, a failed unit on a machine, a crash-looping pod of
// kiln's; it keeps waiting, as each may recover.
func (w *Waiter) BootstrapComplete(ctx context.Context, timeout time.Duration) error {
	end := w.Progress.Start(fmt.Sprintf("Waiting up to %s for bootstrapping to complete", timeout))
	seen := map[string]bool{}
	err := w.until(ctx, timeout, w.newDiagnosis(true).wrap(func(ctx context.Context) (bool, string, error) {
		w.reportNodes(ctx, seen)
		w.reportEtcdMembers(ctx, seen)
		cm, err := w.Client.CoreV1().ConfigMaps(bootstrapNamespace).Get(ctx, bootstrapConfigMap, metav1.GetOptions{})
		if err == nil && handover.IsComplete(cm.Data) {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d nodes registered", countPrefix(seen, "node/")), nil
	}))
	end(err)
	if err != nil {
		return fmt.Errorf("bootstrap did not complete: %w; run `kiln gather bootstrap` to collect logs", err)
	}
	w.Log.Info("Bootstrap complete: the control plane runs on the masters")
	return nil
}

// InstallComplete waits until nodes nodes are up and the cluster's DNS and
// service proxy run on them. A node is up when it is Ready, its kubelet
// renewed its Lease within LeaseFresh and (when Machines is set) its
// machine runs: a stale Ready is never trusted. A stopped machine ends
// the wait at once with a *MachineDownError naming it; a failed unit on a
// machine or a crash-looping pod of kiln's is named in the state line and
// in the timeout error.
func (w *Waiter) InstallComplete(ctx context.Context, nodes int, timeout time.Duration) error {
	end := w.Progress.Start(fmt.Sprintf("Waiting up to %s for the cluster to initialize (%d nodes)", timeout, nodes))
	seen := map[string]bool{}
	err := w.until(ctx, timeout, w.newDiagnosis(false).wrap(func(ctx context.Context) (bool, string, error) {
		w.reportNodes(ctx, seen)
		count, err := w.countNodes(ctx, w.now())
		if down := (*MachineDownError)(nil); errors.As(err, &down) {
			return false, "", err
		}
		if err != nil {
			return false, shorten(err), nil
		}
		if count.up < nodes {
			return false, count.detail(nodes), nil
		}
		ds, err := w.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil || !daemonSetReady(ds, nodes) {
			return false, "kube-proxy not running on every node", nil
		}
		dep, err := w.Client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil || !deploymentAvailable(dep) {
			return false, "CoreDNS not available", nil
		}
		// The NetworkPolicy controller (manifests/15-network-policy.yaml):
		// policies hold on every node from install-complete on. A user who
		// removed the manifest (another policy engine) has none to wait for.
		ds, err = w.Client.AppsV1().DaemonSets("kube-system").Get(ctx, networkPolicyDaemonSet, metav1.GetOptions{})
		if (err != nil && !apierrors.IsNotFound(err)) || (err == nil && !daemonSetReady(ds, nodes)) {
			return false, "the NetworkPolicy controller (kube-router) not running on every node", nil
		}
		if detail := w.addonsPending(ctx, nodes); detail != "" {
			return false, detail, nil
		}
		return true, "", nil
	}))
	end(err)
	if err != nil {
		return fmt.Errorf("the cluster did not initialize: %w", err)
	}
	w.Log.Infof("Install complete: %d nodes Ready, CoreDNS, kube-proxy and NetworkPolicy enforcement running%s", nodes, w.addonsDone())
	return nil
}

// networkPolicyDaemonSet is kube-router's DaemonSet in kube-system
// (data/manifests/cluster/15-network-policy.yaml).
const networkPolicyDaemonSet = "kube-router"

// Where the add-ons run (data/manifests/cluster/13-*, 14-*).
const (
	storageNamespace, storageDeployment = "local-path-storage", "local-path-provisioner"
	metricsNamespace, metricsDeployment = "kube-system", "metrics-server"
	metricsAPIService                   = "v1beta1.metrics.k8s.io"
	// MetalLB (18-metallb.yaml): its controller and, on every node, its
	// speaker.
	metalLBNamespace, metalLBDeployment, metalLBDaemonSet = "metallb-system", "controller", "speaker"
)

// addonsPending says which add-on is not available yet; "" when all are.
// metrics-server turns ready only once it has scraped the kubelets (over
// verified TLS); the metrics API is available once the API server reaches
// it through its Service. MetalLB is available once its controller is and
// a speaker runs on each of the nodes nodes. The API VIP is available once
// it answers /readyz itself (VIP), never through a stand-in.
func (w *Waiter) addonsPending(ctx context.Context, nodes int) string {
	if w.Addons.Storage {
		dep, err := w.Client.AppsV1().Deployments(storageNamespace).Get(ctx, storageDeployment, metav1.GetOptions{})
		if err != nil || !deploymentAvailable(dep) {
			return "local-path-provisioner (default StorageClass) not available"
		}
	}
	if w.Addons.Metrics {
		dep, err := w.Client.AppsV1().Deployments(metricsNamespace).Get(ctx, metricsDeployment, metav1.GetOptions{})
		if err != nil || !deploymentAvailable(dep) {
			return "metrics-server not available"
		}
		if ok, why := w.apiServiceAvailable(ctx, metricsAPIService); !ok {
			return "metrics API " + metricsAPIService + " not available: " + why
		}
	}
	if w.Addons.MetalLB() {
		dep, err := w.Client.AppsV1().Deployments(metalLBNamespace).Get(ctx, metalLBDeployment, metav1.GetOptions{})
		if err != nil || !deploymentAvailable(dep) {
			return "MetalLB's controller (LoadBalancer addresses) not available"
		}
		ds, err := w.Client.AppsV1().DaemonSets(metalLBNamespace).Get(ctx, metalLBDaemonSet, metav1.GetOptions{})
		if err != nil || !daemonSetReady(ds, nodes) {
			return "MetalLB's speaker (LoadBalancer announcements) not running on every node"
		}
	}
	if w.Addons.APIVIP != "" && w.VIP != nil {
		if why := w.VIP(ctx); why != "" {
			return "the API at its VIP " + w.Addons.APIVIP + " (MetalLB announces it for the Service " + manifests.APIVIPNamespace + "/" + manifests.APIVIPService + ") does not answer: " + why
		}
	}
	return ""
}

// addonsDone names the add-ons waited for, for the final log line.
func (w *Waiter) addonsDone() string {
	var names []string
	if w.Addons.Storage {
		names = append(names, "the default StorageClass")
	}
	if w.Addons.Metrics {
		names = append(names, "metrics-server")
	}
	if w.Addons.MetalLB() {
		names = append(names, "MetalLB")
	}
	if w.Addons.APIVIP != "" && w.VIP != nil {
		names = append(names, "the API at its VIP "+w.Addons.APIVIP)
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "; " + names[0] + " available"
	}
	return "; " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " available"
}

// apiService is the part of an APIService the wait reads.
type apiService struct {
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"conditions"`
	} `json:"status"`
}

// apiServiceAvailable reports whether the APIService name has condition
// Available=True, and otherwise why not.
func (w *Waiter) apiServiceAvailable(ctx context.Context, name string) (bool, string) {
	data, err := w.Client.Discovery().RESTClient().Get().
		AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", name).DoRaw(ctx)
	if err != nil {
		return false, shorten(err)
	}
	var s apiService
	if err := json.Unmarshal(data, &s); err != nil {
		return false, shorten(err)
	}
	for _, c := range s.Status.Conditions {
		if c.Type == "Available" {
			return c.Status == "True", c.Message
		}
	}
	return false, "no Available condition yet"
}

// until calls check every Poll until it is done, fails, or timeout passes;
// its detail is shown with the time left, at once when it changes and every
// updateEvery otherwise. When time runs out, the error names the last
// detail.
func (w *Waiter) until(ctx context.Context, timeout time.Duration, check func(context.Context) (bool, string, error)) error {
	poll := w.Poll
	if poll == 0 {
		poll = 2 * time.Second
	}
	last, shown := "", time.Time{}
	var failed error
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		reqCtx, reqCancel := context.WithTimeout(ctx, 10*time.Second)
		done, detail, err := check(reqCtx)
		reqCancel()
		if ctx.Err() != nil {
			// The wait ended during this check: what it saw is the
			// cancellation, not the cluster; keep the last real state.
			return false, nil
		}
		if err != nil || done {
			failed = err
			return true, nil
		}
		if detail != last || time.Since(shown) >= updateEvery {
			deadline, _ := ctx.Deadline() // the sooner of timeout and the caller's
			w.Progress.Update(fmt.Sprintf("%s, %s left", detail, time.Until(deadline).Round(time.Second)))
			shown = time.Now()
		}
		last = detail
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last state: %s)", err, last)
	}
	return failed
}

// reportNodes logs each node the first time it registers and becomes Ready.
func (w *Waiter) reportNodes(ctx context.Context, seen map[string]bool) {
	list, err := w.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		n := &list.Items[i]
		if key := "node/" + n.Name; !seen[key] {
			seen[key] = true
			w.Log.Infof("Node %s registered", n.Name)
		}
		if key := "ready/" + n.Name; !seen[key] && nodeReady(n) {
			seen[key] = true
			w.Log.Infof("Node %s Ready", n.Name)
		}
	}
}

// reportEtcdMembers logs each master whose etcd member installer finished:
// the member votes and the master's control plane is active.
func (w *Waiter) reportEtcdMembers(ctx context.Context, seen map[string]bool) {
	pods, err := w.Client.CoreV1().Pods(installerNamespace).List(ctx, metav1.ListOptions{LabelSelector: installerLabel})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if key := "etcd/" + p.Spec.NodeName; !seen[key] && p.Status.Phase == corev1.PodSucceeded {
			seen[key] = true
			w.Log.Infof("etcd member %s added; its control plane is starting", p.Spec.NodeName)
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func daemonSetReady(ds *appsv1.DaemonSet, nodes int) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && int(s.NumberReady) >= nodes && s.NumberReady == s.DesiredNumberScheduled
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.AvailableReplicas > 0
		}
	}
	return false
}

func countPrefix(m map[string]bool, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// shorten keeps the first line of an error, for one-line progress.
func shorten(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// IsBootstrapComplete reports whether bootstrap-complete was recorded; an
// unreachable API counts as not complete.
func (w *Waiter) IsBootstrapComplete(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cm, err := w.Client.CoreV1().ConfigMaps(bootstrapNamespace).Get(ctx, bootstrapConfigMap, metav1.GetOptions{})
	return err == nil && handover.IsComplete(cm.Data)
}
