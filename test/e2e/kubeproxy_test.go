package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeProxyHealthzPort is where kube-proxy reports its last rule sync on
// every node (its default healthzBindAddress).
const kubeProxyHealthzPort = 10256

// assertKubeProxyRestart: a NodePort Service answers on every node, every
// kube-proxy pod is deleted, and once each replacement has synced its
// rules (its healthz reports a sync after the deletion) the Service still
// answers on every node. A restarted kube-proxy must find the rules it
// left and keep them: with an image whose nft named protocols by number
// it deleted every Service element as stale, and the node refused the
// Service until kube-proxy's hourly full resync.
func assertKubeProxyRestart(t *testing.T, client kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	body := "hello through a restarted kube-proxy"
	svc := createProbeService(ctx, t, client, "probe-kube-proxy", body, corev1.ServiceTypeNodePort, "")
	port := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	ips := nodeAddresses(ctx, t, client)
	get := nodePortGetter(port, body)
	for node, ip := range ips {
		if err := waitNodePort(ctx, get, ip); err != nil {
			t.Fatalf("the NodePort Service on %s (%s:%s) before kube-proxy restarted: %v", node, ip, port, err)
		}
	}

	restarted := time.Now()
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(ips) {
		t.Fatalf("%d kube-proxy pods for %d nodes", len(pods.Items), len(ips))
	}
	for _, p := range pods.Items {
		if err := client.CoreV1().Pods("kube-system").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for node, ip := range ips {
		var last string
		for {
			synced, err := kubeProxySynced(ip)
			if err == nil && synced.After(restarted) {
				break
			}
			last = fmt.Sprintf("last sync %s, %v", synced.Format(time.RFC3339), err)
			if ctx.Err() != nil {
				t.Fatalf("kube-proxy on %s did not sync its rules after its pod was deleted at %s: %s", node, restarted.Format(time.RFC3339), last)
			}
			time.Sleep(time.Second)
		}
	}
	t.Logf("every kube-proxy synced again %s after its pod was deleted", time.Since(restarted).Round(time.Second))
	// A rule kube-proxy lost stays lost until a full resync, and a failed
	// sync retries one 30 s later: watch every node for longer than that.
	var failed []string
	probes := 0
	for end := time.Now().Add(restartWatch); time.Now().Before(end); time.Sleep(time.Second) {
		for node, ip := range ips {
			probes++
			if err := get(ip); err != nil {
				failed = append(failed, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.0"), node, err))
			}
		}
	}
	t.Logf("MEASURE NodePort probes after every kube-proxy restarted: %d of %d failed", len(failed), probes)
	if len(failed) > maxRestartFailures {
		t.Errorf("the NodePort Service failed %d of %d probes (at most %d allowed) after every kube-proxy restarted and synced:\n%s",
			len(failed), probes, maxRestartFailures, strings.Join(failed, "\n"))
	}
}

// restartWatch is how long assertKubeProxyRestart probes the Service on
// every node after the restart, and maxRestartFailures how many probes
// may fail meanwhile (a host slow to answer, not a lost rule: a lost one
// fails every probe).
const (
	restartWatch       = 45 * time.Second
	maxRestartFailures = 2
)

// nodeAddresses maps each Node's name to its InternalIP.
func nodeAddresses(ctx context.Context, t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips[n.Name] = a.Address
			}
		}
	}
	return ips
}

// nodePortGetter returns a probe of a NodePort Service on port that
// expects body. Each probe opens a new connection: one kept alive rides
// its conntrack entry and answers after the rules that let it in are gone.
func nodePortGetter(port, body string) func(ip string) error {
	httpc := &http.Client{Timeout: 3 * time.Second, Transport: clusterTransport()}
	return func(ip string) error {
		resp, err := httpc.Get("http://" + net.JoinHostPort(ip, port) + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err == nil && string(got) != body {
			err = fmt.Errorf("answered %q", got)
		}
		return err
	}
}

// waitNodePort probes ip with get every second until it answers or ctx
// ends; the error is the last probe's.
func waitNodePort(ctx context.Context, get func(ip string) error, ip string) error {
	for {
		err := get(ip)
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

// kubeProxySynced is when the kube-proxy on the node at ip last synced
// its IPv4 rules, from its healthz.
func kubeProxySynced(ip string) (time.Time, error) {
	c := http.Client{Timeout: 3 * time.Second, Transport: clusterTransport()}
	resp, err := c.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(kubeProxyHealthzPort)) + "/healthz")
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	var h struct {
		Status map[string]struct {
			LastUpdated time.Time `json:"lastUpdated"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return time.Time{}, fmt.Errorf("kube-proxy healthz: %w", err)
	}
	v4, ok := h.Status[string(corev1.IPv4Protocol)]
	if !ok {
		return time.Time{}, fmt.Errorf("kube-proxy healthz reports no IPv4 sync")
	}
	return v4.LastUpdated, nil
}
