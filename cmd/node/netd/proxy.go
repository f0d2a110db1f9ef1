package netd

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The node's kube-proxy (data/manifests/cluster/10-kube-proxy.yaml) serves
// its metrics on the node's loopback; this one is set after each successful
// sync of the Service rules.
const (
	DefaultProxyMetricsURL = "http://127.0.0.1:10249/metrics"
	proxySyncedMetric      = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	// DefaultProxyWait bounds the wait for kube-proxy's first sync; after
	// it the CNI config is written anyway (kube-proxy may be replaced by
	// another Service proxy).
	DefaultProxyWait = time.Minute
)

// waitProxySynced waits until the node's kube-proxy has synced its Service
// rules once, so the node turns Ready (which the CNI config written next
// allows) only when its pods can reach Services. Pods started a moment
// earlier found no rule for the API's Service ("no route to host"), and
// metrics-server and local-path-provisioner exit on that, to be restarted
// only after the kubelet's 10 s back-off. It gives up after cfg.ProxyWait,
// logging why; it reports whether kube-proxy synced.
func waitProxySynced(ctx context.Context, cfg Config) bool {
	if cfg.ProxyMetricsURL == "" {
		return true
	}
	limit := cfg.ProxyWait
	if limit == 0 {
		limit = DefaultProxyWait
	}
	start, logged := time.Now(), false
	var last error
	err := wait.PollUntilContextTimeout(ctx, proxyPoll, limit, true, func(ctx context.Context) (bool, error) {
		synced, err := proxySynced(ctx, cfg.ProxyMetricsURL)
		if !synced && !logged {
			cfg.Log.Infof("waiting for kube-proxy's first sync before writing the CNI config (%s)", proxyState(err))
			logged = true
		}
		last = err
		return synced, nil
	})
	if err != nil {
		cfg.Log.Warnf("kube-proxy has not synced its rules after %s (%s); writing the CNI config anyway", limit, proxyState(last))
		return false
	}
	if logged {
		cfg.Log.Infof("kube-proxy synced its rules after %s", time.Since(start).Round(100*time.Millisecond))
	}
	return true
}

// proxyPoll is how often waitProxySynced reads kube-proxy's metrics.
const proxyPoll = 250 * time.Millisecond

func proxyState(err error) string {
	if err != nil {
		return err.Error()
	}
	return "no sync yet"
}

// proxySynced reads kube-proxy's metrics: true once any IP family's rules
// were synced.
func proxySynced(ctx context.Context, url string) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, proxySyncedMetric) {
			continue
		}
		rest := strings.TrimPrefix(line, proxySyncedMetric)
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // another metric with this prefix
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil && v > 0 {
			return true, nil
		}
	}
	return false, sc.Err()
}
