// Package netd is kiln's pod network agent: on each node it writes the CNI
// bridge configuration for the node's Node.spec.podCIDR and keeps one route
// per other node's podCIDR. With networkType KilnBridge the route goes via
// that node's InternalIP (host-gw style on the machines' shared L2 bridge);
// with KilnVXLAN it goes through a VXLAN device to that node (vxlan.go).
// docs/pod-network.md explains the choice.
package netd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// RouteProtocol marks the routes netd owns, so it never touches others.
const RouteProtocol = nodelayout.PodRouteProtocol

// Runner runs a command on the node; tests record the argv instead.
type Runner interface {
	Run(ctx context.Context, argv ...string) ([]byte, error)
}

// Config configures the agent.
type Config struct {
	NodeName    string
	CNIConfPath string // e.g. /etc/cni/net.d/10-kiln.conflist
	Runner      Runner
	Log         logrus.FieldLogger
	// NetworkType is types.NetworkTypeKilnBridge (also when empty) or
	// types.NetworkTypeKilnVXLAN.
	NetworkType string
	// NodeIP is this machine's address, the local end of KilnVXLAN's
	// tunnels; when invalid, its Node's InternalIP (the bootstrap machine,
	// which is no Node, must set it).
	NodeIP netip.Addr
	// ProxyMetricsURL is the node's kube-proxy metrics; a new CNI config is
	// written only after kube-proxy's first sync there (proxy.go), at most
	// ProxyWait (DefaultProxyWait when zero). Empty: no wait.
	ProxyMetricsURL string
	ProxyWait       time.Duration
	// Egress is what the node's pods reach outside the cluster; netd
	// keeps its masquerade rules (egress.go).
	Egress Egress
	// ServiceRoute is the Service network, which netd routes on-link
	// when the node has no route to it (serviceroute.go); invalid: never.
	ServiceRoute netip.Prefix
}

// Route is a route to another node's pods.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
	// Dev, when set, is the device Via is reached through, on-link (the
	// VXLAN device); otherwise the kernel finds Via on a connected network.
	Dev string
}

// peer is another node that has an address and a pod CIDR.
type peer struct {
	ip    netip.Addr
	cidrs []netip.Prefix
}

// peers returns the nodes other than self with an InternalIP and a podCIDR,
// in the order of nodes.
func peers(self string, nodes []*corev1.Node) []peer {
	var out []peer
	for _, n := range nodes {
		ip, cidrs := internalIP(n), podCIDRs(n)
		if n.Name != self && ip.IsValid() && len(cidrs) > 0 {
			out = append(out, peer{ip, cidrs})
		}
	}
	return out
}

// DesiredRoutes returns the routes a node needs: every other node's podCIDRs
// via its InternalIP, sorted. Nodes without either are skipped.
func DesiredRoutes(self string, nodes []*corev1.Node) []Route {
	var out []Route
	for _, p := range peers(self, nodes) {
		for _, c := range p.cidrs {
			out = append(out, Route{Dst: c, Via: p.ip})
		}
	}
	sortRoutes(out)
	return out
}

func sortRoutes(rs []Route) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Dst.String() < rs[j].Dst.String() })
}

// RouteArgv is the command that installs r.
func RouteArgv(r Route) []string {
	argv := []string{"ip", "route", "replace", r.Dst.String(), "via", r.Via.String()}
	if r.Dev != "" {
		argv = append(argv, "dev", r.Dev, "onlink")
	}
	return append(argv, "proto", RouteProtocol)
}

// routeEntry is r as an entry netd owns, keyed by its destination.
func routeEntry(r Route) entry {
	return entry{key: r.Dst.String(), state: r.Via.String(), add: RouteArgv(r),
		del: []string{"ip", "route", "del", r.Dst.String(), "proto", RouteProtocol}}
}

// CNIConfig returns the CNI configuration list for a node's pod CIDR; a
// positive mtu is the MTU of the bridge and the pods' interfaces (below
// the VXLAN device's), zero leaves the bridge plugin's default.
func CNIConfig(podCIDR netip.Prefix, mtu int) ([]byte, error) {
	bridge := map[string]any{
		"type":        "bridge",
		"bridge":      nodelayout.PodBridge,
		"isGateway":   true,
		"ipMasq":      false,
		"hairpinMode": true,
		"ipam": map[string]any{
			"type":   "host-local",
			"ranges": [][]map[string]string{{{"subnet": podCIDR.Masked().String()}}},
			"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
		},
	}
	if mtu > 0 {
		bridge["mtu"] = mtu
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kiln",
		"plugins": []any{
			bridge,
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// Run watches Nodes until ctx ends.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	for _, s := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"} {
		if err := os.WriteFile(s, []byte("1"), 0o644); err != nil {
			cfg.Log.Warnf("cannot set %s: %v", s, err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	inf := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, n any) { notify(n) }, DeleteFunc: notify,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		nodes, err := inf.Lister().List(labels.Everything())
		if err == nil {
			err = reconcile(ctx, cfg, nodes)
		}
		if err != nil {
			cfg.Log.Warnf("reconcile: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// reconcile installs the route to the Service network where the node has
// none, the paths to the other nodes' pods and the pods' egress, then this
// node's CNI config (which may wait for kube-proxy: the paths must not).
func reconcile(ctx context.Context, cfg Config, nodes []*corev1.Node) error {
	if err := reconcileServiceRoute(ctx, cfg); err != nil {
		// Not the pod network's: its paths are kept all the same.
		cfg.Log.Warnf("route to the Service network: %v", err)
	}
	mtu, err := reconcilePaths(ctx, cfg, nodes)
	if err != nil {
		return err
	}
	if err := reconcileEgress(ctx, cfg); err != nil {
		return err
	}
	n := selfNode(cfg.NodeName, nodes)
	if n == nil {
		return nil // the bootstrap machine, or a node not registered yet
	}
	cidrs := podCIDRs(n)
	if len(cidrs) == 0 {
		cfg.Log.Infof("node %s has no podCIDR yet", n.Name)
		return nil
	}
	return writeCNIConfig(ctx, cfg, cidrs[0], mtu)
}

// selfNode is the Node named self, nil when there is none.
func selfNode(self string, nodes []*corev1.Node) *corev1.Node {
	for _, n := range nodes {
		if n.Name == self {
			return n
		}
	}
	return nil
}

// reconcilePaths makes the node's routes (and, for KilnVXLAN, its tunnel)
// match nodes; it returns the pods' MTU, zero for the default.
func reconcilePaths(ctx context.Context, cfg Config, nodes []*corev1.Node) (int, error) {
	switch cfg.NetworkType {
	case "", types.NetworkTypeKilnBridge:
		return 0, reconcileRoutes(ctx, cfg, DesiredRoutes(cfg.NodeName, nodes))
	case types.NetworkTypeKilnVXLAN:
		return reconcileVXLAN(ctx, cfg, nodes)
	}
	return 0, fmt.Errorf("network type %q: netd knows %s", cfg.NetworkType, strings.Join(types.NetworkTypes(), ", "))
}

// reconcileRoutes installs want and removes the other routes netd owns.
func reconcileRoutes(ctx context.Context, cfg Config, want []Route) error {
	set, err := routeSet(ctx, cfg, want)
	if err != nil {
		return err
	}
	return syncSets(ctx, cfg, set)
}

// routeSet pairs want with the routes of RouteProtocol the node has.
func routeSet(ctx context.Context, cfg Config, want []Route) (entrySet, error) {
	var routes []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
	}
	if err := listJSON(ctx, cfg.Runner, &routes, "ip", "-j", "route", "show", "proto", RouteProtocol); err != nil {
		return entrySet{}, err
	}
	var s entrySet
	for _, r := range routes {
		dst, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			continue
		}
		if cfg.ServiceRoute.IsValid() && dst == cfg.ServiceRoute.Masked() {
			continue // reconcileServiceRoute's
		}
		via, _ := netip.ParseAddr(r.Gateway)
		s.have = append(s.have, routeEntry(Route{Dst: dst, Via: via}))
	}
	for _, r := range want {
		s.want = append(s.want, routeEntry(r))
	}
	return s, nil
}

// writeCNIConfig writes the node's CNI config; when it changed, containerd
// is restarted, because containerd 1.6 does not pick up a CNI config that
// appears after it started ("cni plugin not initialized").
func writeCNIConfig(ctx context.Context, cfg Config, cidr netip.Prefix, mtu int) error {
	data, err := CNIConfig(cidr, mtu)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(cfg.CNIConfPath); err == nil && string(old) == string(data) {
		return nil
	}
	waitProxySynced(ctx, cfg)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := atomicfile.Write(cfg.CNIConfPath, data, 0o644); err != nil {
		return err
	}
	cfg.Log.Infof("wrote %s for pod CIDR %s; restarting containerd", cfg.CNIConfPath, cidr)
	if out, err := cfg.Runner.Run(ctx, "systemctl", "restart", "containerd.service"); err != nil {
		return fmt.Errorf("restart containerd: %v: %s", err, out)
	}
	return nil
}

func internalIP(n *corev1.Node) netip.Addr {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				return ip
			}
		}
	}
	return netip.Addr{}
}

func podCIDRs(n *corev1.Node) []netip.Prefix {
	raw := n.Spec.PodCIDRs
	if len(raw) == 0 && n.Spec.PodCIDR != "" {
		raw = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, c := range raw {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			out = append(out, p)
		}
	}
	return out
}
