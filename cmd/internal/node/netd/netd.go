// Package netd is kiln's pod network agent ("KilnBridge"): on each node it
// writes the CNI bridge configuration for the node's Node.spec.podCIDR and
// keeps one route per other node's podCIDR via that node's InternalIP
// (host-gw style on the machines' shared L2 bridge). docs/pod-network.md
// explains the choice.
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

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// RouteProtocol marks the routes netd owns, so it never touches others.
const RouteProtocol = "199"

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
	// ProxyMetricsURL is the node's kube-proxy metrics; a new CNI config is
	// written only after kube-proxy's first sync there (proxy.go), at most
	// ProxyWait (DefaultProxyWait when zero). Empty: no wait.
	ProxyMetricsURL string
	ProxyWait       time.Duration
}

// Route is a route to another node's pods.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
}

// DesiredRoutes returns the routes a node needs: every other node's podCIDRs
// via its InternalIP, sorted. Nodes without either are skipped.
func DesiredRoutes(self string, nodes []*corev1.Node) []Route {
	var out []Route
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		ip := internalIP(n)
		if !ip.IsValid() {
			continue
		}
		for _, c := range podCIDRs(n) {
			out = append(out, Route{Dst: c, Via: ip})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dst.String() < out[j].Dst.String() })
	return out
}

// RouteArgv is the command that installs r.
func RouteArgv(r Route) []string {
	return []string{"ip", "route", "replace", r.Dst.String(), "via", r.Via.String(), "proto", RouteProtocol}
}

// CNIConfig returns the CNI configuration list for a node's pod CIDR.
func CNIConfig(podCIDR netip.Prefix) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kiln",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR.Masked().String()}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
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

// reconcile installs the routes to the other nodes' pods, then this node's
// CNI config (which may wait for kube-proxy: the routes must not).
func reconcile(ctx context.Context, cfg Config, nodes []*corev1.Node) error {
	if err := reconcileRoutes(ctx, cfg, nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Name != cfg.NodeName {
			continue
		}
		cidrs := podCIDRs(n)
		if len(cidrs) == 0 {
			cfg.Log.Infof("node %s has no podCIDR yet", n.Name)
			break
		}
		if err := writeCNIConfig(ctx, cfg, cidrs[0]); err != nil {
			return err
		}
	}
	return nil
}

func reconcileRoutes(ctx context.Context, cfg Config, nodes []*corev1.Node) error {
	want := DesiredRoutes(cfg.NodeName, nodes)
	have, err := ownRoutes(ctx, cfg.Runner)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, r := range want {
		keep[r.Dst.String()] = true
		if have[r.Dst.String()] == r.Via.String() {
			continue
		}
		if out, err := cfg.Runner.Run(ctx, RouteArgv(r)...); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(RouteArgv(r), " "), err, out)
		}
		cfg.Log.Infof("route %s via %s", r.Dst, r.Via)
	}
	for dst := range have {
		if !keep[dst] {
			if out, err := cfg.Runner.Run(ctx, "ip", "route", "del", dst, "proto", RouteProtocol); err != nil {
				return fmt.Errorf("ip route del %s: %v: %s", dst, err, out)
			}
			cfg.Log.Infof("removed route %s", dst)
		}
	}
	return nil
}

// writeCNIConfig writes the node's CNI config; when it changed, containerd
// is restarted, because containerd 1.6 does not pick up a CNI config that
// appears after it started ("cni plugin not initialized").
func writeCNIConfig(ctx context.Context, cfg Config, cidr netip.Prefix) error {
	data, err := CNIConfig(cidr)
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

// ownRoutes lists the routes with RouteProtocol as destination -> gateway.
func ownRoutes(ctx context.Context, r Runner) (map[string]string, error) {
	out, err := r.Run(ctx, "ip", "-j", "route", "show", "proto", RouteProtocol)
	if err != nil {
		return nil, fmt.Errorf("ip route show: %v: %s", err, out)
	}
	var routes []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &routes); err != nil {
			return nil, fmt.Errorf("ip route show: %w", err)
		}
	}
	have := map[string]string{}
	for _, r := range routes {
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			have[p.String()] = r.Gateway
		}
	}
	return have, nil
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
