package netd

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// reconcileServiceRoute routes the Service network on-link through the
// interface of the node's address when the node has no route to it at
// all: a host without a default route (an air-gapped server) could
// otherwise not connect to a ClusterIP from its own network namespace ("network is unreachable" before kube-proxy's DNAT applies):
// kube-apiserver calling an aggregated API such as metrics-server or a
// webhook, a hostNetwork pod. A node that routes the network already (a
// default route; a local machine's own on-link route) is left alone. The
// route has netd's protocol, so a host's reset removes it with netd's
// other routes; reconcileRoutes leaves it (routeSet).
func reconcileServiceRoute(ctx context.Context, cfg Config) error {
	svc := cfg.ServiceRoute.Masked()
	if !svc.IsValid() {
		return nil
	}
	var own []struct{}
	if err := listJSON(ctx, cfg.Runner, &own, "ip", "-j", "route", "show", svc.String(), "proto", RouteProtocol); err != nil {
		return err
	}
	if len(own) > 0 {
		return nil
	}
	// The first address of the network: the kubernetes Service's.
	if _, err := cfg.Runner.Run(ctx, "ip", "-j", "route", "get", svc.Addr().Next().String()); err == nil {
		return nil
	}
	if !cfg.NodeIP.IsValid() {
		return fmt.Errorf("the Service network %s has no route here, and netd has no --node-ip to route it through", svc)
	}
	var links []struct {
		IfName string `json:"ifname"`
	}
	if err := listJSON(ctx, cfg.Runner, &links, "ip", "-j", "-4", "addr", "show", "to", netip.PrefixFrom(cfg.NodeIP, 32).String()); err != nil {
		return err
	}
	if len(links) == 0 || links[0].IfName == "" {
		return fmt.Errorf("the Service network %s has no route here, and no interface holds the node's address %s", svc, cfg.NodeIP)
	}
	argv := ServiceRouteArgv(svc, links[0].IfName, cfg.NodeIP)
	if out, err := cfg.Runner.Run(ctx, argv...); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
	cfg.Log.Infof("the node had no route to the Service network %s: routed it on-link through %s", svc, links[0].IfName)
	return nil
}

// ServiceRouteArgv is the command that routes the Service network svc (a
// masked prefix) on-link through dev, from the node's address src.
func ServiceRouteArgv(svc netip.Prefix, dev string, src netip.Addr) []string {
	return []string{"ip", "route", "replace", svc.String(), "dev", dev, "scope", "link", "src", src.String(), "proto", RouteProtocol}
}
