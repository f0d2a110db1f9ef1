package servicelb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kiln-project/kiln/platforms/lb"
)

// resync is how often the controller reconciles without an event: it also
// catches an address removed from the bridge by hand, and a new list of
// machines.
const resync = 30 * time.Second

// DefaultIdleTimeout closes a proxied connection on which neither direction
// has moved a byte for 10 minutes. That is longer than the idle timeouts of
// the cloud load balancers applications are written for (AWS NLB 350 s,
// Azure 4 minutes), so what works behind those works here; and it is far
// shorter than TCP keepalive's 2 hours, so the connection of a peer that
// vanished without a FIN (a machine stopped, a client gone) stops holding
// two sockets and a slot under the cap of this root process.
const DefaultIdleTimeout = 10 * time.Minute

// DefaultMaxConns caps the connections each Service port proxies at once.
// A connection holds two sockets and 64 KiB of buffers, so the cap bounds
// one port at 2,048 file descriptors and about 64 MiB: far more
// connections than a local cluster's clients make, far fewer than it
// would take a flood of them to exhaust the host.
const DefaultMaxConns = 1024

// Controller keeps the host-side addresses, proxies and statuses of a
// cluster's LoadBalancer Services.
type Controller struct {
	Client kubernetes.Interface
	Addrs  Addresses
	Pool   Pool
	// Machines returns the addresses kiln assigned to the cluster's
	// machines, the only backends; it is called on every pass. Nil, or an
	// empty list, proxies to nothing.
	Machines func() (Machines, error)
	// IdleTimeout and MaxConns are each port's limits; zero is
	// DefaultIdleTimeout and DefaultMaxConns.
	IdleTimeout time.Duration
	MaxConns    int
	Log         logrus.FieldLogger

	services  cacheLister
	nodes     cacheLister
	assigned  map[string]netip.Addr
	balancers map[netip.Addr]*lb.Balancer
	// noted is, by Node name, what was last logged about the Node's
	// backend, so a problem is logged once, not on every pass.
	noted map[string]string
	// machines is the list of machines last logged.
	machines string
}

// cacheLister lists the objects of one informer.
type cacheLister interface {
	List() []any
}

// Run watches Services and Nodes and reconciles on every change and every
// resync until ctx is done; then it stops every proxy and takes every
// address off the bridge. Statuses stay: a restarted controller gives each
// Service the address it had.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Pool.Validate(); err != nil {
		return err
	}
	f := informers.NewSharedInformerFactory(c.Client, resync)
	svcInf, nodeInf := f.Core().V1().Services().Informer(), f.Core().V1().Nodes().Informer()
	c.services, c.nodes = svcInf.GetStore(), nodeInf.GetStore()
	kick := make(chan struct{}, 1)
	notify := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf, nodeInf} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	c.Log.Infof("Watching LoadBalancer Services; addresses %s", c.Pool)
	for !cache.WaitForCacheSync(ctx.Done(), svcInf.HasSynced, nodeInf.HasSynced) {
		if ctx.Err() != nil {
			return c.stop()
		}
	}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.Log.Warnf("Reconciling LoadBalancer Services: %v", err)
		}
		select {
		case <-ctx.Done():
			return c.stop()
		case <-kick:
			// Let a burst of events settle into one pass.
			time.Sleep(200 * time.Millisecond)
		case <-tick.C:
		}
	}
}

// stop shuts every proxy down and removes every address.
func (c *Controller) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for key := range c.assigned {
		errs = append(errs, c.release(ctx, key))
	}
	return errors.Join(errs...)
}

// Sync makes addresses, proxies and statuses match the Services and Nodes
// seen: one pass, safe to repeat.
func (c *Controller) Sync(ctx context.Context) error {
	if c.assigned == nil {
		c.assigned, c.balancers = map[string]netip.Addr{}, map[netip.Addr]*lb.Balancer{}
	}
	want, others := c.loadBalancers()
	var errs []error
	for key := range c.assigned {
		if _, ok := want[key]; !ok {
			c.Log.Infof("Service %s: releasing %s", key, c.assigned[key])
			errs = append(errs, c.release(ctx, key))
		}
	}
	machines := Machines{}
	if c.Machines != nil {
		m, err := c.Machines()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the machines' addresses: %w", err))
		}
		machines = m
	}
	if s := machines.String(); s != c.machines {
		c.Log.Infof("LoadBalancer traffic goes to these machines' node ports: %s", s)
		c.machines = s
	}
	backends := c.backends(machines)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := want[keys[i]], want[keys[j]]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return keys[i] < keys[j]
	})
	// Services that already show an address keep it, first come first
	// served; then the others get the lowest free ones.
	for _, key := range keys {
		if _, ok := c.assigned[key]; ok {
			continue
		}
		if a, ok := c.previous(want[key]); ok {
			c.assigned[key] = a
			c.Log.Infof("Service %s: keeps %s", key, a)
		}
	}
	for _, key := range keys {
		svc := want[key]
		a, ok := c.assigned[key]
		if !ok {
			if a, ok = c.Pool.allocate(c.used()); !ok {
				errs = append(errs, fmt.Errorf("service %s: no free address in %s", key, c.Pool))
				continue
			}
			c.assigned[key] = a
			c.Log.Infof("Service %s: assigned %s", key, a)
		}
		if err := c.serve(ctx, key, svc, a, backends); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, c.setStatus(ctx, svc, []corev1.LoadBalancerIngress{ingress(a)}))
	}
	for _, svc := range others {
		errs = append(errs, c.setStatus(ctx, svc, nil))
	}
	errs = append(errs, c.removeStale(ctx))
	return errors.Join(errs...)
}

// loadBalancers returns the Services this controller serves, by
// namespace/name, and the other Services that still show one of its
// addresses (their type changed).
func (c *Controller) loadBalancers() (map[string]*corev1.Service, []*corev1.Service) {
	want := map[string]*corev1.Service{}
	var others []*corev1.Service
	for _, o := range c.services.List() {
		svc, ok := o.(*corev1.Service)
		if !ok {
			continue
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && svc.DeletionTimestamp == nil {
			want[svc.Namespace+"/"+svc.Name] = svc
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && c.Pool.Contains(a) && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				others = append(others, svc)
				break
			}
		}
	}
	return want, others
}

// previous returns the address a Service shows in its status or asks for
// in spec.loadBalancerIP, when it is in the pool and free.
func (c *Controller) previous(svc *corev1.Service) (netip.Addr, bool) {
	used := c.used()
	var cands []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		cands = append(cands, in.IP)
	}
	cands = append(cands, svc.Spec.LoadBalancerIP) //nolint:staticcheck // still the way to ask for an address
	for _, s := range cands {
		if a, err := netip.ParseAddr(s); err == nil && c.Pool.Contains(a) && !used[a] {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// used returns the assigned addresses.
func (c *Controller) used() map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	for _, a := range c.assigned {
		used[a] = true
	}
	return used
}

// backends returns the addresses to proxy to, sorted: for each Ready Node
// that is one of m's machines, the address kiln assigned that machine. The
// addresses the Node reports are never used (see Machines); a Node that
// is not a machine, or whose machine's address is not a machine address,
// gets no traffic. Each such Node, and each Node that reports an InternalIP
// other than its machine's, is logged once.
func (c *Controller) backends(m Machines) []string {
	noted := map[string]string{}
	var out []string
	for _, o := range c.nodes.List() {
		n, ok := o.(*corev1.Node)
		if !ok || !ready(n) {
			continue
		}
		var note string
		a, err := m.backend(n.Name, c.Pool)
		if err != nil {
			note = fmt.Sprintf("Node %s gets no LoadBalancer traffic: %v", n.Name, err)
		} else {
			out = append(out, a.String())
			if r := internalIP(n); r != a.String() {
				note = fmt.Sprintf("Node %s reports InternalIP %q; its LoadBalancer traffic goes to %s, the address kiln assigned its machine", n.Name, r, a)
			}
		}
		if note == "" {
			continue
		}
		noted[n.Name] = note
		if c.noted[n.Name] != note {
			c.Log.Warn(note)
		}
	}
	c.noted = noted
	sort.Strings(out)
	return out
}

// internalIP returns the first InternalIP n reports, or "".
func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Limits are the limits of every port of a Service's proxy.
type Limits struct {
	// IdleTimeout closes a connection idle both ways for that long.
	IdleTimeout time.Duration
	// MaxConns caps the connections of one port at once.
	MaxConns int
}

// limits returns the controller's limits, defaults filled in.
func (c *Controller) limits() Limits {
	l := Limits{IdleTimeout: c.IdleTimeout, MaxConns: c.MaxConns}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	return l
}

// ProxyConfig returns the proxy configuration of one Service on address a: each
// TCP port with a node port, balanced over backends at that node port with
// TCP health checks, under lim.
func ProxyConfig(svc *corev1.Service, a netip.Addr, backends []string, lim Limits) *lb.Config {
	cfg := &lb.Config{Listen: a.String()}
	idle := 0
	if lim.IdleTimeout > 0 {
		idle = max(int(lim.IdleTimeout/time.Millisecond), 1) // a timeout never rounds down to none
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != "" || p.NodePort == 0 {
			continue
		}
		s := lb.Service{
			Name:              svc.Namespace + "/" + svc.Name + ":" + strconv.Itoa(int(p.Port)),
			Port:              int(p.Port),
			Health:            lb.CheckTCP,
			IdleTimeoutMillis: idle,
			MaxConns:          lim.MaxConns,
		}
		for _, b := range backends {
			s.Backends = append(s.Backends, b+":"+strconv.Itoa(int(p.NodePort)))
		}
		cfg.Services = append(cfg.Services, s)
	}
	return cfg
}

// serve puts a on the bridge and makes its proxy match the Service.
func (c *Controller) serve(ctx context.Context, key string, svc *corev1.Service, a netip.Addr, backends []string) error {
	if err := c.Addrs.Add(ctx, a); err != nil {
		return err
	}
	b, ok := c.balancers[a]
	if !ok {
		b = lb.New(c.Log.WithField("service", key))
		c.balancers[a] = b
	}
	if err := b.Apply(ProxyConfig(svc, a, backends, c.limits())); err != nil {
		return fmt.Errorf("service %s on %s: %w", key, a, err)
	}
	return nil
}

// release stops the proxy of a Service and takes its address off the
// bridge.
func (c *Controller) release(ctx context.Context, key string) error {
	a := c.assigned[key]
	if b, ok := c.balancers[a]; ok {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		b.Shutdown(sctx)
		cancel()
		delete(c.balancers, a)
	}
	delete(c.assigned, key)
	return c.Addrs.Del(ctx, a)
}

// removeStale takes pool addresses that no Service holds off the bridge:
// left by a controller that was killed, or by a Service deleted meanwhile.
func (c *Controller) removeStale(ctx context.Context) error {
	have, err := c.Addrs.List(ctx)
	if err != nil {
		return err
	}
	used := c.used()
	var errs []error
	for _, a := range have {
		if c.Pool.Contains(a) && !used[a] {
			c.Log.Infof("Removing stale address %s", a)
			errs = append(errs, c.Addrs.Del(ctx, a))
		}
	}
	return errors.Join(errs...)
}

// ingress is the status entry of address a.
func ingress(a netip.Addr) corev1.LoadBalancerIngress {
	vip := corev1.LoadBalancerIPModeVIP
	return corev1.LoadBalancerIngress{IP: a.String(), IPMode: &vip}
}

// setStatus writes status.loadBalancer.ingress when it differs.
func (c *Controller) setStatus(ctx context.Context, svc *corev1.Service, in []corev1.LoadBalancerIngress) error {
	if reflect.DeepEqual(svc.Status.LoadBalancer.Ingress, in) || len(svc.Status.LoadBalancer.Ingress) == 0 && len(in) == 0 {
		return nil
	}
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer.Ingress = in
	_, err := c.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("service %s/%s: writing its status: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}
