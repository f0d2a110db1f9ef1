package netd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
)

// kube-proxy's metrics before its first sync, then after it.
var proxyMetrics = []string{
	"",
	"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n" +
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds_total 7\n",
	"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n" +
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 0\n",
	"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n" +
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7954096e+09\n",
}

func TestProxySyncedReadsTheSyncTimestamp(t *testing.T) {
	for i, body := range proxyMetrics {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
		got, err := proxySynced(context.Background(), srv.URL)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := i == len(proxyMetrics)-1; got != want {
			t.Errorf("metrics %q: synced = %v, want %v", body, got, want)
		}
	}
}

func TestCNIConfigWaitsForKubeProxysFirstSync(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := int(served.Add(1)) - 1
		fmt.Fprint(w, proxyMetrics[min(n, len(proxyMetrics)-1)])
	}))
	defer srv.Close()
	conf := filepath.Join(t.TempDir(), "10-kiln.conflist")
	r := &fakeRunner{}
	cfg := Config{NodeName: "w0", CNIConfPath: conf, Runner: r, Log: log, ProxyMetricsURL: srv.URL, ProxyWait: 10 * time.Second}
	nodes := []*corev1.Node{node("w0", "10.66.0.21", "10.128.4.0/23"), node("m0", "10.66.0.11", "10.128.0.0/23")}
	if err := reconcile(context.Background(), cfg, nodes); err != nil {
		t.Fatal(err)
	}
	if n := served.Load(); n < int32(len(proxyMetrics)) {
		t.Fatalf("CNI config written after %d metrics reads, before kube-proxy's sync", n)
	}
	if _, err := os.Stat(conf); err != nil {
		t.Fatal(err)
	}
	// The routes went in first: they must not wait for kube-proxy.
	if want := []string{"ip -j route show proto 199", "ip route replace 10.128.0.0/23 via 10.66.0.11 proto 199", "systemctl restart containerd.service"}; !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("calls = %v, want %v", r.calls, want)
	}
	// The same config again: no wait, no restart.
	before := served.Load()
	r.calls = nil
	r.out = map[string]string{listRoutes: `[{"dst":"10.128.0.0/23","gateway":"10.66.0.11"}]`}
	if err := reconcile(context.Background(), cfg, nodes); err != nil {
		t.Fatal(err)
	}
	if served.Load() != before || len(r.calls) != 1 {
		t.Fatalf("unchanged config: %d more metrics reads, calls %v", served.Load()-before, r.calls)
	}
}

func TestCNIConfigIsWrittenWhenKubeProxyNeverSyncs(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	conf := filepath.Join(t.TempDir(), "10-kiln.conflist")
	// Nothing listens here: kube-proxy is not running.
	cfg := Config{NodeName: "w0", CNIConfPath: conf, Runner: &fakeRunner{}, Log: log,
		ProxyMetricsURL: "http://127.0.0.1:1/metrics", ProxyWait: 300 * time.Millisecond}
	if err := reconcile(context.Background(), cfg, []*corev1.Node{node("w0", "10.66.0.21", "10.128.4.0/23")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(conf); err != nil {
		t.Fatalf("no CNI config after the wait gave up: %v", err)
	}
}
