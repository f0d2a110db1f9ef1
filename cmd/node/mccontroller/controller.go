// Package mccontroller is the machine-config controller (`kiln node
// machine-config-controller`, a leader-elected Deployment on the masters):
// it renders every MachineConfigPool's MachineConfigs into a rendered
// config (package machineconfig), and walks the pool's nodes to it at
// most maxUnavailable at a time (masters one at a time, only while the
// API is ready and every master Ready): cordon, drain through the
// eviction API (PodDisruptionBudgets hold it), point the Node's
// kiln.dev/desired-config at the rendered config, wait for the node's
// agent (package mcagent) to report it Done, uncordon. It reports each
// pool's counts and conditions in its status.
package mccontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// Config configures the controller.
type Config struct {
	// Resync is how often every pool is reconciled without an event (drains
	// in progress are looked at again this often).
	Resync time.Duration
	// Log is the controller's log.
	Log logrus.FieldLogger
}

// drainPoll is how often a drain in progress is looked at.
const drainPoll = 2 * time.Second

// controller holds the running controller's clients and listers.
type controller struct {
	cfg    Config
	client kubernetes.Interface
	dyn    dynamic.Interface
	nodes  corev1listers.NodeLister
	mcs    cache.GenericLister
	pools  cache.GenericLister
	said   map[string]string // node -> last drain message logged
}

// Run reconciles until ctx ends. It must run as the only leader.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface, dyn dynamic.Interface) error {
	kf := informers.NewSharedInformerFactory(client, 0)
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c := &controller{cfg: cfg, client: client, dyn: dyn, said: map[string]string{},
		nodes: kf.Core().V1().Nodes().Lister(),
		mcs:   df.ForResource(machineconfig.MachineConfigs).Lister(),
		pools: df.ForResource(machineconfig.MachineConfigPools).Lister(),
	}
	kick := make(chan struct{}, 1)
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { nonBlocking(kick) },
		UpdateFunc: func(any, any) { nonBlocking(kick) },
		DeleteFunc: func(any) { nonBlocking(kick) },
	}
	for _, inf := range []cache.SharedIndexInformer{kf.Core().V1().Nodes().Informer(),
		df.ForResource(machineconfig.MachineConfigs).Informer(), df.ForResource(machineconfig.MachineConfigPools).Informer()} {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return err
		}
	}
	kf.Start(ctx.Done())
	df.Start(ctx.Done())
	kf.WaitForCacheSync(ctx.Done())
	df.WaitForCacheSync(ctx.Done())
	cfg.Log.Info("machine-config controller running")
	tick := time.NewTicker(cfg.Resync)
	defer tick.Stop()
	for {
		draining, err := c.reconcile(ctx)
		if err != nil && ctx.Err() == nil {
			cfg.Log.Warnf("reconcile: %v", err)
		}
		// Pods leaving a node send no event the controller watches: while a
		// drain waits for them, look again every drainPoll.
		next := tick.C
		if draining {
			next = time.After(drainPoll)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			// Let a burst of events settle into one pass.
			time.Sleep(200 * time.Millisecond)
		case <-next:
		}
	}
}

func nonBlocking(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reconcile makes one pass over every pool; draining is true while a
// drain waits for pods to leave.
func (c *controller) reconcile(ctx context.Context) (draining bool, err error) {
	if err := c.ensurePools(ctx); err != nil {
		return false, err
	}
	mcs, err := list[machineconfig.MachineConfig](c.mcs)
	if err != nil {
		return false, err
	}
	pools, err := list[machineconfig.MachineConfigPool](c.pools)
	if err != nil {
		return false, err
	}
	nodeObjs, err := c.nodes.List(labels.Everything())
	if err != nil {
		return false, err
	}
	members := map[string][]Node{}
	for _, n := range nodeObjs {
		v := view(n)
		if p := PoolOf(v, pools); p != "" {
			members[p] = append(members[p], v)
		}
	}
	healthy := c.mastersHealthy(ctx, members[machineconfig.MasterPool])
	keep := map[string]bool{}
	var errs []error
	for _, pool := range pools {
		target, busy, err := c.pool(ctx, pool, mcs, members[pool.Name], healthy)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", pool.Name, err))
		}
		draining = draining || busy
		keep[target] = true
	}
	for _, n := range nodeObjs {
		keep[n.Annotations[machineconfig.CurrentConfigAnnotation]] = true
		keep[n.Annotations[machineconfig.DesiredConfigAnnotation]] = true
	}
	c.collect(ctx, mcs, keep)
	return draining, errors.Join(errs...)
}

// pool renders one pool, acts on its nodes and reports its status; it
// returns the pool's target config, and whether a drain is waiting.
func (c *controller) pool(ctx context.Context, pool machineconfig.MachineConfigPool, mcs []machineconfig.MachineConfig, nodes []Node, healthy bool) (string, bool, error) {
	target := pool.Status.Configuration
	r, renderErr := machineconfig.Render(pool.Name, machineconfig.PoolSources(pool.Name, mcs))
	if renderErr == nil {
		if err := c.store(ctx, r, mcs); err != nil {
			return target, false, err
		}
		target = r.Name
	}
	var errs []error
	draining := false
	for _, a := range Plan(pool, target, nodes, healthy) {
		done, err := c.act(ctx, a, target)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", a.Kind, a.Node, err))
		}
		draining = draining || !done
	}
	st := Status(pool, target, nodes, renderErr)
	if !reflect.DeepEqual(stripTimes(st), stripTimes(pool.Status)) {
		now := metav1.Now()
		for i := range st.Conditions {
			if st.Conditions[i].LastTransitionTime.IsZero() {
				st.Conditions[i].LastTransitionTime = now
			}
		}
		pool.Status = st
		if err := c.updateStatus(ctx, pool); err != nil {
			errs = append(errs, err)
		}
		if renderErr != nil {
			c.cfg.Log.Warnf("pool %s: %v", pool.Name, renderErr)
		}
	}
	return target, draining, errors.Join(errs...)
}

// stripTimes is st without the conditions' transition times, to compare.
func stripTimes(st machineconfig.PoolStatus) machineconfig.PoolStatus {
	st.Conditions = slices.Clone(st.Conditions)
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return st
}

// store creates the rendered config's object unless it exists.
func (c *controller) store(ctx context.Context, r *machineconfig.Rendered, mcs []machineconfig.MachineConfig) error {
	for _, mc := range mcs {
		if mc.Name == r.Name {
			return nil
		}
	}
	obj, err := r.Object()
	if err != nil {
		return err
	}
	u, err := toUnstructured(obj)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(machineconfig.MachineConfigs).Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		from := strings.Join(r.Sources, ", ")
		if from == "" {
			from = "no MachineConfig: kiln's install-time config only"
		}
		c.cfg.Log.Infof("pool %s: rendered %s from %s", r.Pool, r.Name, from)
	}
	return err
}

// collect deletes rendered configs that no pool targets and no node runs
// or is moving to.
func (c *controller) collect(ctx context.Context, mcs []machineconfig.MachineConfig, keep map[string]bool) {
	for _, mc := range mcs {
		if mc.Labels[machineconfig.RenderedForLabel] == "" || keep[mc.Name] {
			continue
		}
		if err := c.dyn.Resource(machineconfig.MachineConfigs).Delete(ctx, mc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Log.Warnf("removing unused %s: %v", mc.Name, err)
		}
	}
}

// ensurePools creates the master and worker pools when they are missing.
func (c *controller) ensurePools(ctx context.Context) error {
	for _, name := range []string{machineconfig.MasterPool, machineconfig.WorkerPool} {
		if _, err := c.pools.Get(name); err == nil {
			continue
		}
		p := &machineconfig.MachineConfigPool{}
		p.APIVersion, p.Kind, p.Name = machineconfig.Group+"/"+machineconfig.Version, "MachineConfigPool", name
		u, err := toUnstructured(p)
		if err != nil {
			return err
		}
		delete(u.Object, "status")
		if _, err := c.dyn.Resource(machineconfig.MachineConfigPools).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating pool %s: %w", name, err)
		}
	}
	return nil
}

// updateStatus writes pool's status.
func (c *controller) updateStatus(ctx context.Context, pool machineconfig.MachineConfigPool) error {
	u, err := toUnstructured(&pool)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(machineconfig.MachineConfigPools).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // the next pass has the newer object
	}
	return err
}

// mastersHealthy is true when the API answers ready and every master is Ready.
func (c *controller) mastersHealthy(ctx context.Context, masters []Node) bool {
	for _, m := range masters {
		if !m.Ready {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && strings.TrimSpace(string(body)) == "ok"
}

// act performs one action; done is false while a drain waits for pods.
func (c *controller) act(ctx context.Context, a Action, target string) (done bool, err error) {
	switch a.Kind {
	case SetDesired:
		return true, c.annotate(ctx, a.Node, nil, map[string]any{machineconfig.DesiredConfigAnnotation: target})
	case Uncordon:
		c.cfg.Log.Infof("node %s runs %s: uncordoning", a.Node, target)
		return true, c.annotate(ctx, a.Node, false, map[string]any{machineconfig.CordonedAnnotation: nil})
	case Drain:
		n, err := c.nodes.Get(a.Node)
		if err != nil {
			return true, err
		}
		if n.Annotations[machineconfig.CordonedAnnotation] == "" {
			c.cfg.Log.Infof("node %s: cordoning and draining for %s", a.Node, target)
			if err := c.annotate(ctx, a.Node, true, map[string]any{machineconfig.CordonedAnnotation: target}); err != nil {
				return true, err
			}
		}
		drained, err := c.drain(ctx, n)
		if err != nil || !drained {
			return false, err
		}
		c.cfg.Log.Infof("node %s drained: applying %s", a.Node, target)
		return true, c.annotate(ctx, a.Node, nil, map[string]any{machineconfig.DesiredConfigAnnotation: target})
	}
	return true, fmt.Errorf("unknown action %q", a.Kind)
}

// annotate patches a node's annotations (nil removes one) and, when
// unschedulable is a bool, its spec.unschedulable.
func (c *controller) annotate(ctx context.Context, node string, unschedulable any, annotations map[string]any) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": annotations}}
	if unschedulable != nil {
		patch["spec"] = map[string]any{"unschedulable": unschedulable}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// drain evicts node's pods (not DaemonSets' or static pods', not finished
// ones) and says whether none is left. An eviction a PodDisruptionBudget
// refuses is tried again on the next pass. Pods still terminating on a
// node that is not Ready count as gone: its kubelet cannot confirm them.
func (c *controller) drain(ctx context.Context, n *corev1.Node) (bool, error) {
	pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String(),
	})
	if err != nil {
		return false, err
	}
	ready := view(n).Ready
	var left, blocked []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if !evictable(p) {
			continue
		}
		if p.DeletionTimestamp != nil {
			if ready {
				left = append(left, p.Namespace+"/"+p.Name)
			}
			continue
		}
		left = append(left, p.Namespace+"/"+p.Name)
		err := c.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		})
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			blocked = append(blocked, p.Namespace+"/"+p.Name)
		default:
			return false, fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	msg := ""
	if len(left) > 0 {
		msg = fmt.Sprintf("node %s: waiting for %d pods to leave (%s)", n.Name, len(left), strings.Join(first(left, 5), ", "))
		if len(blocked) > 0 {
			msg += fmt.Sprintf("; a PodDisruptionBudget holds %s", strings.Join(first(blocked, 5), ", "))
		}
	}
	if msg != "" && c.said[n.Name] != msg {
		c.cfg.Log.Info(msg)
	}
	c.said[n.Name] = msg
	return len(left) == 0, nil
}

// evictable is a pod a drain moves: not a static pod's mirror, not a
// DaemonSet's, not finished, not the controller's own.
func evictable(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if p.Namespace == "kiln-system" && p.Labels["app.kubernetes.io/name"] == "kiln-machine-config-controller" {
		return false // the controller itself tolerates the cordon
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return false
		}
	}
	return true
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("%d more", len(s)-n))
	}
	return s
}

// view is what the rollout needs of a Node.
func view(n *corev1.Node) Node {
	v := Node{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations, Unschedulable: n.Spec.Unschedulable}
	if v.Annotations == nil {
		v.Annotations = map[string]string{}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			v.Ready = c.Status == corev1.ConditionTrue
		}
	}
	return v
}

// list converts every object of a dynamic lister into T.
func list[T any](l cache.GenericLister) ([]T, error) {
	objs, err := l.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var t T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
			return nil, fmt.Errorf("%s: %w", u.GetName(), err)
		}
		out = append(out, t)
	}
	return out, nil
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
