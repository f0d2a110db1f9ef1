package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/cmd/cluster/apivip"
)

// sshVIP is the last octet of the address of the hosts' subnet that a
// cluster with managedVIP gives platform.ssh.apiVIP: no host has it, so
// kiln keeps it (MetalLB announces it from a master whose API server is
// ready).
const sshVIP = 190

// excludeFromAnnouncers labels node out of MetalLB's announcers and
// returns what takes the label off again.
func excludeFromAnnouncers(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) func() {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, apivip.ExcludeLabel)
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return func() {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, apivip.ExcludeLabel)
		client.CoreV1().Nodes().Patch(context.Background(), node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	}
}

// adminConfigVia is the admin kubeconfig's client configuration sent to
// the API server at addr (a master's address) instead of its server (the
// API VIP), whose name TLS still verifies: the test's own client, which
// must not depend on the VIP it checks.
func adminConfigVia(t *testing.T, dir, addr string) *rest.Config {
	t.Helper()
	_, rc := adminClientConfig(t, dir)
	u, err := url.Parse(rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	rc = rest.CopyConfig(rc)
	rc.TLSClientConfig.ServerName = u.Hostname()
	rc.Host = "https://" + net.JoinHostPort(addr, u.Port())
	return rc
}

// vipHolder waits until MetalLB's status record and the test host's ARP
// entry (after a request to the VIP) agree on the one node that announces
// the API VIP vip, other than keep (labelled out of the announcers), and
// returns it.
func vipHolder(ctx context.Context, t *testing.T, f *sshFleet, dyn dynamic.Interface, probe *vipWatch, keep string) string {
	t.Helper()
	var holder string
	start, nudged, nudges := time.Now(), time.Now(), 0
	defer func() {
		if nudges > 0 {
			t.Logf("MEASURE MetalLB had no single record of the API VIP's announcer: nudged its speakers %d times (apivip.Nudge) before it named %s, %s after the wait began", nudges, holder, time.Since(start).Round(100*time.Millisecond))
		}
	}()
	waitFor(t, ctx, 2*time.Minute, "one master announcing the API VIP "+probe.vip+", as MetalLB's record and the test host's ARP entry say", func() (bool, string) {
		nodes, why := l2Announcers(ctx, dyn, manifests.APIVIPNamespace, manifests.APIVIPService)
		if len(nodes) != 1 {
			// MetalLB can lose the record; kiln's own wait
			// (apivip.Mover.Off) nudges the speakers then, and so does
			// this one.
			if time.Since(nudged) >= apivip.DefaultNudgeAfter {
				nudged, nudges = time.Now(), nudges+1
				if err := apivip.Nudge(ctx, probe.kube); err != nil {
					why += "; " + err.Error()
				}
			}
			return false, why
		}
		err := probe.readyz()
		owner, oerr := arpOwner(ctx, f, probe.vip)
		holder = nodes[0]
		return err == nil && owner == holder && holder != keep, fmt.Sprintf("MetalLB says %s; the ARP entry is %s's (%v); /readyz: %v", holder, owner, oerr, err)
	})
	return holder
}

// attempt is one request of a vipWatch: when it started and how it ended.
type attempt struct {
	at  time.Time
	err error
}

// vipWatch asks the API at its VIP from the test host, as a user outside
// the hosts does, while a master goes and comes back: /readyz on a new
// connection every 250 ms (each given 1 s), and `kubectl get --raw
// /readyz` with auth/kubeconfig (through `kiln kubectl`) every 2 s.
type vipWatch struct {
	vip string
	// dir and masters are the cluster's, for waitMastersReady.
	dir     string
	masters []sshHost
	// kube is the admin client through the first master, which nudges
	// MetalLB's speakers (vipHolder).
	kube   kubernetes.Interface
	client *http.Client
	url    string
	mu     sync.Mutex
	probes []attempt
	kubes  []attempt
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newVIPWatch returns the watch of the API at vip of the cluster in dir,
// not started.
func newVIPWatch(t *testing.T, dir, vip string, masters []sshHost) *vipWatch {
	t.Helper()
	_, rc := adminClientConfig(t, dir)
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &vipWatch{
		vip: vip, dir: dir, masters: masters, kube: kubernetes.NewForConfigOrDie(adminConfigVia(t, dir, masters[0].Address)),
		url: "https://" + net.JoinHostPort(vip, "6443") + "/readyz",
		client: &http.Client{Timeout: time.Second, Transport: &http.Transport{
			DisableKeepAlives: true, TLSClientConfig: tlsConfig, DialContext: clusterDial,
		}},
	}
}

// readyz asks /readyz at the VIP once, on a new connection.
func (w *vipWatch) readyz() error {
	resp, err := w.client.Get(w.url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("%s: %q", resp.Status, body)
	}
	return nil
}

// start begins asking, until stop.
func (w *vipWatch) start(ctx context.Context, kubectl kubectlRunner) {
	ctx, w.cancel = context.WithCancel(ctx)
	loop := func(every time.Duration, into *[]attempt, ask func() error) {
		defer w.done.Done()
		for ctx.Err() == nil {
			at := time.Now()
			err := ask()
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			*into = append(*into, attempt{at, err})
			w.mu.Unlock()
			time.Sleep(time.Until(at.Add(every)))
		}
	}
	w.done.Add(2)
	go loop(250*time.Millisecond, &w.probes, w.readyz)
	go loop(2*time.Second, &w.kubes, func() error {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := kubectl(actx, "get", "--raw", "/readyz", "--request-timeout=5s")
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
}

// stop ends the asking.
func (w *vipWatch) stop() {
	w.cancel()
	w.done.Wait()
}

// snapshot returns the attempts so far.
func (w *vipWatch) snapshot() (probes, kubes []attempt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]attempt(nil), w.probes...), append([]attempt(nil), w.kubes...)
}

// waitBack waits until the VIP has answered the last 8 probes (2 s) after
// since, and returns when it answered again after its last failure since
// then (since itself when none failed) and the failed probes.
func (w *vipWatch) waitBack(ctx context.Context, t *testing.T, since time.Time, within time.Duration) (time.Time, []attempt) {
	t.Helper()
	var back time.Time
	var failed []attempt
	waitFor(t, ctx, within, "the API to answer at its VIP "+w.vip+" again", func() (bool, string) {
		probes, _ := w.snapshot()
		back, failed = since, nil
		run := 0
		for _, p := range probes {
			if p.at.Before(since) {
				continue
			}
			if p.err != nil {
				failed = append(failed, p)
				back, run = time.Time{}, 0
				continue
			}
			if back.IsZero() {
				back = p.at
			}
			run++
		}
		last := "no probe yet"
		if len(failed) > 0 {
			last = failed[len(failed)-1].err.Error()
		}
		return run >= 8, fmt.Sprintf("%d probes failed since the stop; the last: %s", len(failed), last)
	})
	return back, failed
}

// failedAfter returns the probes and kubectl calls that started after t
// and failed.
func (w *vipWatch) failedAfter(t time.Time) (probes, kubes []attempt) {
	all, allKubes := w.snapshot()
	pick := func(as []attempt) []attempt {
		var r []attempt
		for _, a := range as {
			if a.at.After(t) && a.err != nil {
				r = append(r, a)
			}
		}
		return r
	}
	return pick(all), pick(allKubes)
}

// describe lists attempts for a message.
func describe(as []attempt, since time.Time) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "\n  +%s: %v", a.at.Sub(since).Round(10*time.Millisecond), a.err)
	}
	return b.String()
}

// stopVIPMaster stops the master that announces the API VIP (the one
// MetalLB prefers) while w asks the VIP from the test host: never
// masters[0], labelled out of the announcers for the while, as the test's
// own client goes through it. The API must answer at the VIP again, from
// another master, with at most 10 s between the first request that failed
// and the first that answered again (the times are measured), and kubectl
// with auth/kubeconfig fails only within that window. It returns the
// stopped host and what to call once its host is back and its Node Ready:
// the VIP answered throughout the return (it moves back to the preferred
// master without a second outage: no kubectl call failed, no two probes
// in a row); then the link of the master that announces the VIP is cut
// (cutVIPMaster, vipCuts times).
func stopVIPMaster(ctx context.Context, t *testing.T, f *sshFleet, client kubernetes.Interface, dyn dynamic.Interface, w *vipWatch, kubectl kubectlRunner, masters []sshHost) (sshHost, func()) {
	t.Helper()
	keep := masters[0].Name
	include := excludeFromAnnouncers(ctx, t, client, keep)
	w.start(ctx, kubectl)
	waitMastersReady(ctx, t, w.dir, w.masters)
	// The master that announces the VIP now is the one MetalLB prefers
	// (nothing has moved it): back, it takes the VIP again, and that move
	// must cost no second outage.
	holder := vipHolder(ctx, t, f, dyn, w, keep)
	var stopped sshHost
	for _, m := range masters {
		if m.Name == holder {
			stopped = m
		}
	}
	if stopped.Name == "" {
		include()
		t.Fatalf("the API VIP %s is announced from %s, which is no master", w.vip, holder)
	}
	time.Sleep(3 * time.Second) // answers before the stop, to compare with
	stopAt := time.Now()
	if err := f.m.Stop(ctx, stopped.Name); err != nil {
		w.stop()
		include()
		t.Fatalf("stopping %s: %v", stopped.Name, err)
	}
	down := time.Since(stopAt)
	back, failed := w.waitBack(ctx, t, stopAt, 2*time.Minute)
	var outage time.Duration
	if len(failed) > 0 {
		outage = back.Sub(failed[0].at)
	}
	next, err := arpOwner(ctx, f, w.vip)
	if err != nil || next == stopped.Name || next == keep {
		t.Errorf("the API VIP answers from %q (%v); want a master other than %s (stopped) and %s (labelled out)", next, err, stopped.Name, keep)
	}
	t.Logf("MEASURE API VIP failover: %s (announcing) stopped, its host down after %s; the VIP answered again %s after the stop began, %s after its first failed request (%d probes failed, 4 a second), from %s",
		stopped.Name, down.Round(100*time.Millisecond), back.Sub(stopAt).Round(100*time.Millisecond), outage.Round(100*time.Millisecond), len(failed), next)
	if outage > 10*time.Second {
		t.Errorf("the API at its VIP %s was out for %s (more than 10 s) when %s stopped:%s", w.vip, outage.Round(100*time.Millisecond), stopped.Name, describe(failed, stopAt))
	}
	// kubectl fails only within the window.
	_, kubes := w.failedAfter(stopAt)
	for _, k := range kubes {
		if k.at.After(back) {
			t.Errorf("kubectl with auth/kubeconfig failed after the failover window (%s from the stop):%s", back.Sub(stopAt).Round(100*time.Millisecond), describe([]attempt{k}, stopAt))
		}
	}
	return stopped, func() {
		t.Helper()
		// The returned master's speaker starts once its API server is
		// ready (kiln node wait-api-ready); then MetalLB chooses again.
		waitFor(t, ctx, 3*time.Minute, "MetalLB's speaker on "+stopped.Name+" ready again", func() (bool, string) {
			pods, err := client.CoreV1().Pods(manifests.MetalLBNamespace).List(ctx, metav1.ListOptions{
				LabelSelector: "component=speaker", FieldSelector: "spec.nodeName=" + stopped.Name})
			if err != nil || len(pods.Items) != 1 {
				return false, fmt.Sprint(len(pods.Items), " speaker pods, ", err)
			}
			for _, c := range pods.Items[0].Status.Conditions {
				if c.Type == corev1.PodReady {
					return c.Status == corev1.ConditionTrue, string(c.Status) + " " + c.Message
				}
			}
			return false, string(pods.Items[0].Status.Phase)
		})
		time.Sleep(15 * time.Second)
		// A second outage is two probes in a row failing (half a second
		// without an answer) or any kubectl call failing. A single probe
		// may be lost when the VIP moves back to the returned master: its
		// speaker announces as soon as its API server's endpoint turns
		// ready, and its kube-proxy, which batches its updates (at most one
		// a second), may send to that endpoint a moment later.
		probes, kubes := w.failedAfter(back)
		all, allKubes := w.snapshot()
		if len(kubes) > 0 {
			t.Errorf("kubectl with auth/kubeconfig failed at the VIP while %s came back:%s", stopped.Name, describe(kubes, stopAt))
		}
		if run := longestFailedRun(all, back); run > 1 {
			t.Errorf("the API at its VIP failed again while %s came back, %d probes in a row:%s", stopped.Name, run, describe(probes, stopAt))
		}
		owner, err := arpOwner(ctx, f, w.vip)
		t.Logf("MEASURE API VIP while %s came back: %d of %d probes and %d of %d kubectl calls failed since the failover%s; announced from %s (%v)",
			stopped.Name, len(probes), len(all), len(kubes), len(allKubes), describe(probes, stopAt), owner, err)
		// Then the hard way, as a master that loses its power or its
		// cable looks to the others: its speaker cannot say goodbye.
		waitMastersReady(ctx, t, w.dir, w.masters)
		for i := range vipCuts() {
			cutVIPMaster(ctx, t, f, dyn, w, keep, i)
		}
		w.stop()
		include()
	}
}

// longestFailedRun returns the most attempts after t that failed in a row.
func longestFailedRun(as []attempt, t time.Time) int {
	longest, run := 0, 0
	for _, a := range as {
		if !a.at.After(t) {
			continue
		}
		if a.err == nil {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
}

// vipCuts is how many times stopVIPMaster cuts the announcing master's
// link: 1, or KILN_E2E_VIP_CUTS for a median (docs/benchmarks.md).
func vipCuts() int {
	if n, err := strconv.Atoi(os.Getenv("KILN_E2E_VIP_CUTS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// cutOutageBound is how long the VIP may be out when its master drops
// off the network: the other speakers' memberlist first suspects it (a
// probe a second, 500 ms to answer), then declares it dead after its
// suspicion timeout, 4 s when the other speakers confirm the suspicion
// and up to 24 s when they do not (Lifeguard, memberlist's LAN defaults,
// which MetalLB does not expose); measured 6-7 s mostly, 27 s once on an
// idle machine (docs/benchmarks.md). CI runs it beside the conformance
// suite's build, where every timer of the speakers runs late: the bound
// tells a VIP that moves (measured and logged) from one that does not,
// not a target.
const cutOutageBound = 60 * time.Second

// cutSettleBound is how long the VIP may take to answer steadily again
// once the cut master is back on the network: it may take the VIP back
// before its API server, cut off from etcd meanwhile, is ready again,
// and lose it again when its endpoint turns unready (what failed is
// measured and logged).
const cutSettleBound = 2 * time.Minute

// cutVIPMaster cuts the link of the master that announces the API VIP
// (other than keep), as a master that loses its power or its cable looks
// to the others, until the VIP answers again from another master, at most
// cutOutageBound after its first failed request (measured), kubectl with
// auth/kubeconfig failing only within that window; then the link comes
// back, and the API answers at the VIP again within the bound (the master
// may take it back before its API server is ready again: what fails then
// is measured).
func cutVIPMaster(ctx context.Context, t *testing.T, f *sshFleet, dyn dynamic.Interface, w *vipWatch, keep string, round int) {
	t.Helper()
	holder := vipHolder(ctx, t, f, dyn, w, keep)
	link := hostLink(ctx, t, f, holder)
	time.Sleep(2 * time.Second) // answers before the cut
	cutAt := time.Now()
	link("down")
	defer link("up") // also when a wait below fails
	back, failed := w.waitBack(ctx, t, cutAt, 2*time.Minute)
	link("up")
	var outage time.Duration
	if len(failed) > 0 {
		outage = back.Sub(failed[0].at)
	}
	next, err := arpOwner(ctx, f, w.vip)
	if err != nil || next == holder || next == keep {
		t.Errorf("the API VIP answers from %q (%v); want a master other than %s (cut off) and %s (labelled out)", next, err, holder, keep)
	}
	t.Logf("MEASURE API VIP failover, round %d: %s (announcing) cut off the network; the VIP answered again %s after the cut, %s after its first failed request (%d probes failed, 4 a second), from %s",
		round+1, holder, back.Sub(cutAt).Round(100*time.Millisecond), outage.Round(100*time.Millisecond), len(failed), next)
	if outage > cutOutageBound {
		t.Errorf("the API at its VIP %s was out for %s (more than %s) when %s was cut off:%s", w.vip, outage.Round(100*time.Millisecond), cutOutageBound, holder, describe(failed, cutAt))
	}
	_, kubes := w.failedAfter(cutAt)
	for _, k := range kubes {
		if k.at.After(back) {
			t.Errorf("kubectl with auth/kubeconfig failed after the failover window:%s", describe([]attempt{k}, cutAt))
		}
	}
	// Back on the network, the master may take the VIP back before its
	// API server, cut off from etcd meanwhile, is ready again: its Node
	// and endpoint still read Ready (no one could write otherwise while it
	// was away), so MetalLB's record is stale for a few seconds
	// (docs/platform-ssh.md, "The API VIP"). The VIP answers steadily again
	// within cutSettleBound, every master's API server is ready, and what
	// failed is measured.
	upAt := time.Now()
	time.Sleep(5 * time.Second)
	w.waitBack(ctx, t, upAt, cutSettleBound)
	probes, kubes := w.failedAfter(upAt)
	owner, err := arpOwner(ctx, f, w.vip)
	t.Logf("MEASURE API VIP after %s came back on the network: %d probes and %d kubectl calls failed%s%s; announced from %s (%v)",
		holder, len(probes), len(kubes), describe(probes, upAt), describe(kubes, upAt), owner, err)
	waitMastersReady(ctx, t, w.dir, w.masters)
}

// waitMastersReady waits until the API server of each of masters answers
// /readyz at its own address (etcd member caught up): the next failure
// starts from a whole control plane.
func waitMastersReady(ctx context.Context, t *testing.T, dir string, masters []sshHost) {
	t.Helper()
	for _, m := range masters {
		rc := adminConfigVia(t, dir, m.Address)
		client := kubernetes.NewForConfigOrDie(rc)
		waitFor(t, ctx, 3*time.Minute, m.Name+"'s API server ready", func() (bool, string) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(rctx).Error()
			return err == nil, fmt.Sprint(err)
		})
	}
}
