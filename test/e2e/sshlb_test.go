package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/cmd/cluster/apivip"
)

// servicel2statuses are MetalLB's records of which node announces a
// Service's address (layer 2).
var serviceL2Statuses = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "servicel2statuses"}

// assertSSHLoadBalancer: a LoadBalancer Service of an ssh cluster whose
// platform.ssh.loadBalancerIPs is pool gets an address from it, which
// answers from the test host across the hosts' bridge; the host of the
// node that announces it drops off the network, and the address answers
// again from another node (the time is measured); back on the network,
// the address answers throughout. The
// Service's pod runs on keep, whose node is labelled out of the
// announcers (node.kubernetes.io/exclude-from-external-load-balancers)
// and is never stopped: the test's client reaches the API through it.
func assertSSHLoadBalancer(ctx context.Context, t *testing.T, f *sshFleet, client kubernetes.Interface, dyn dynamic.Interface, pool [2]netip.Addr, keep string) {
	t.Helper()
	const ns, name, body = "default", "probe-ssh-lb", "hello from behind MetalLB"
	defer excludeFromAnnouncers(ctx, t, client, keep)()
	createProbeService(ctx, t, client, name, body, corev1.ServiceTypeLoadBalancer, keep)
	// Gone when this check ends, not at the end of the cluster's test.
	defer client.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	defer client.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	ip := waitLoadBalancerIP(ctx, t, client, ns, name, 3*time.Minute)
	if a, err := netip.ParseAddr(ip); err != nil || a.Less(pool[0]) || pool[1].Less(a) {
		t.Fatalf("Service %s got %s, outside loadBalancerIPs %s-%s", name, ip, pool[0], pool[1])
	}
	url := "http://" + ip + "/"
	waitFor(t, ctx, 2*time.Minute, "GET "+url+" from the test host", func() (bool, string) {
		got, err := httpGet(url)
		return got == body, fmt.Sprintf("%q %v", got, err)
	})
	// MetalLB's record and the host that answers (the test host's ARP
	// entry after a GET) agree on one node.
	var first string
	waitFor(t, ctx, time.Minute, "one node announcing "+ip+", as MetalLB's record and the test host's ARP entry say", func() (bool, string) {
		nodes, why := l2Announcers(ctx, dyn, ns, name)
		if len(nodes) != 1 {
			return false, why
		}
		got, err := httpGet(url)
		owner, oerr := arpOwner(ctx, f, ip)
		first = nodes[0]
		return got == body && owner == first, fmt.Sprintf("MetalLB says %s; the ARP entry is %s's (%v); GET %q %v", first, owner, oerr, got, err)
	})
	if first == keep {
		t.Fatalf("%s is announced from %s, whose node is labelled %s", ip, keep, apivip.ExcludeLabel)
	}
	t.Logf("GET %s from the test host answers %q; announced from %s", url, body, first)

	// The announcing host drops off the network, as a host that loses
	// its power or its cable looks to the others: its speaker cannot say
	// goodbye, the others' memberlist must find it dead, and one of them
	// takes the address over with a gratuitous ARP.
	link := hostLink(ctx, t, f, first)
	// Each try gives up after 500 ms (an answer takes milliseconds), so
	// the time is measured to about half a second.
	cut := time.Now()
	link("down")
	defer link("up")
	var failed int
	for {
		got, err := httpGetWithin(url, 500*time.Millisecond)
		if got == body {
			break
		}
		failed++
		if time.Since(cut) > 2*time.Minute {
			t.Fatalf("%s did not answer again within 2 minutes of %s's link going down: %q %v", url, first, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(cut)
	// Who answers now is whom the test host's ARP entry names: MetalLB's
	// status record of a node that went away may stay behind, and the
	// new one may come later.
	next, err := arpOwner(ctx, f, ip)
	if err != nil {
		t.Fatal(err)
	}
	if next == first {
		t.Errorf("%s answers from %s, whose link is down", ip, first)
	}
	if next == keep {
		t.Errorf("%s moved to %s, whose node is labelled %s", ip, next, apivip.ExcludeLabel)
	}
	t.Logf("MEASURE LoadBalancer failover: %s's link cut, %s answered again after %s (%d failed GETs), from %s",
		first, url, took.Round(100*time.Millisecond), failed, next)
	// Back on the network, the two speakers agree again: the address
	// answers (the GETs that failed meanwhile, if any, are counted).
	link("up")
	back := time.Now()
	failed = 0
	var got string
	for time.Since(back) < 30*time.Second {
		if got, err = httpGet(url); got != body {
			failed++
		}
		time.Sleep(time.Second)
	}
	if got != body {
		t.Fatalf("GET %s 30 s after %s's link came back: %q %v", url, first, got, err)
	}
	t.Logf("MEASURE LoadBalancer after %s's link came back: %d of 30 GETs failed", first, failed)
}

// hostLink returns what sets the link of test host name on the bridge
// (its veth on the machine's side) "up" or "down": down, the host drops
// off the network as it would when it loses its power or its cable.
func hostLink(ctx context.Context, t *testing.T, f *sshFleet, name string) func(state string) {
	t.Helper()
	info, err := f.m.Inspect(ctx, name)
	if err != nil || info.Veth == "" {
		t.Fatalf("%s's link: %+v %v", name, info, err)
	}
	return func(state string) {
		if out, err := exec.Command("ip", "link", "set", "dev", info.Veth, state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set dev %s %s: %v %s", info.Veth, state, err, out)
		}
	}
}

// l2Announcers lists the nodes that MetalLB's status records name as
// announcing the address of Service ns/name: a record of a node that went
// away may stay behind. The second result lists every record, for a
// message.
func l2Announcers(ctx context.Context, dyn dynamic.Interface, ns, name string) ([]string, string) {
	list, err := dyn.Resource(serviceL2Statuses).Namespace(manifests.MetalLBNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err.Error()
	}
	var nodes, seen []string
	for _, it := range list.Items {
		l := it.GetLabels()
		node, _, _ := unstructured.NestedString(it.Object, "status", "node")
		seen = append(seen, fmt.Sprintf("%s/%s on %s", l["metallb.io/service-namespace"], l["metallb.io/service-name"], node))
		if l["metallb.io/service-name"] == name && l["metallb.io/service-namespace"] == ns && node != "" {
			nodes = append(nodes, node)
		}
	}
	return nodes, fmt.Sprint(seen)
}

// arpOwner returns the test host whose interface has the MAC address the
// machine's ARP entry for ip names: the host that answered for it.
func arpOwner(ctx context.Context, f *sshFleet, ip string) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", "-j", "neigh", "show", "to", ip).Output()
	if err != nil {
		return "", fmt.Errorf("ip neigh show to %s: %w", ip, err)
	}
	var entries []struct {
		LLAddr string `json:"lladdr"`
	}
	if err := json.Unmarshal(out, &entries); err != nil || len(entries) != 1 || entries[0].LLAddr == "" {
		return "", fmt.Errorf("ARP entry of %s: %s (%v)", ip, out, err)
	}
	mac := entries[0].LLAddr
	for _, h := range f.Hosts {
		addrs, err := f.m.Exec(ctx, h.Name, "sh", "-c", "cat /sys/class/net/*/address")
		if err != nil {
			continue // a stopped host
		}
		if slices.Contains(strings.Fields(string(addrs)), mac) {
			return h.Name, nil
		}
	}
	return "", fmt.Errorf("no test host has %s, which the ARP entry of %s names", mac, ip)
}
