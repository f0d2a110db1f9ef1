package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The ssh hosts' LAN: a connected ssh cluster (networking.egress NAT) on
// test hosts that have no default route, beside a server of their LAN in
// a network namespace of its own, attached to their bridge, with no
// default route either: a web server, the resolver the hosts'
// resolv.conf names, and their time server (platform.ssh.ntpServers).
// Nothing on that LAN routes anywhere else, so no packet of the cluster
// can leave it: the cluster is connected to its LAN and sealed from the
// rest by construction, which closedLANKiln checks before it lets kiln
// create it.
const (
	// lanNS is the LAN server's network namespace; lanVeth is its link's
	// end on the hosts' bridge.
	lanNS   = "kiln-e2e-lan"
	lanVeth = "kiln-e2e-lan0"
	// lanHost is the last byte of the LAN server's address in the hosts'
	// subnet.
	lanHost = "100"
	// lanName is the LAN server's name, which only its own DNS answers.
	lanName = "lan.example.test"
	// lanKiln is the name of the wrapper that runs kiln for a cluster on
	// the closed LAN; requireSealed lets it create a connected cluster.
	lanKiln = "kiln-on-a-closed-lan"
)

// lanResolvConf is the hosts' /etc/resolv.conf on a LAN of subnet
// ("10.x.y."): its server is their resolver.
func lanResolvConf(subnet string) map[string]string {
	return map[string]string{"/etc/resolv.conf": "nameserver " + subnet + lanHost + "\n"}
}

// startLAN attaches the LAN server to the hosts' bridge at subnet+lanHost
// and serves the web page, lanName's DNS and NTP there until the test ends;
// it returns the server's address.
func startLAN(t *testing.T, f *sshFleet, subnet string) string {
	t.Helper()
	addr := subnet + lanHost
	exec.Command("ip", "netns", "del", lanNS).Run() // a killed run's leftovers
	exec.Command("ip", "link", "del", lanVeth).Run()
	hostRun(t, "ip", "netns", "add", lanNS)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", lanNS).Run()
		exec.Command("ip", "link", "del", lanVeth).Run()
	})
	hostRun(t, "ip", "-n", lanNS, "link", "set", "lo", "up")
	hostRun(t, "ip", "link", "add", lanVeth, "type", "veth", "peer", "name", "lan0", "netns", lanNS)
	hostRun(t, "ip", "link", "set", lanVeth, "master", f.bridge, "up")
	hostRun(t, "ip", "-n", lanNS, "addr", "add", addr+"/24", "dev", "lan0")
	hostRun(t, "ip", "-n", lanNS, "link", "set", "lan0", "up")
	serveIn(t, lanNS, worldServers{HTTP: addr + ":80", DNS: addr, Names: lanName + ".=" + addr, NTP: addr})
	waitAnswers(t, lanNS, addr, "80", worldGreeting)
	return addr
}

// closedLANKiln checks that no host of f has a default route, so that
// nothing of a connected cluster on them leaves their LAN, and returns a
// wrapper of kiln that requireSealed lets create one there.
func closedLANKiln(ctx context.Context, t *testing.T, f *sshFleet, kiln string) string {
	t.Helper()
	for _, h := range f.Hosts {
		out, err := f.Client.RunScript(ctx, h.Address, "ip -4 route show default; ip -6 route show default\n")
		if err != nil {
			t.Fatalf("the routes of %s: %v", h.Name, err)
		}
		if strings.TrimSpace(string(out)) != "" {
			t.Fatalf("test host %s has a default route, so its LAN is not closed:\n%s", h.Name, out)
		}
	}
	wrapper := filepath.Join(t.TempDir(), lanKiln)
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", kiln)), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// assertLAN checks, from a pod on each of nodes, that the LAN server's
// name resolves (CoreDNS forwards it to the hosts' resolver, the LAN
// server) and that its page answers, having seen the pod's node's address
// (the node masqueraded the pod).
func assertLAN(ctx context.Context, t *testing.T, client kubernetes.Interface, nodes []sshHost, lanAddr string) {
	t.Helper()
	for i, n := range nodes {
		name := fmt.Sprintf("probe-lan-%d", i)
		start := time.Now()
		pod := probePod(name, n.Name, corev1.RestartPolicyOnFailure, "--retry=30s", "--resolve="+lanName, "--get=http://"+lanName+"/")
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(ctx, t, client, "default", name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		logs := podLogs(ctx, t, client, "default", name)
		t.Logf("MEASURE a pod on %s reached the LAN server by name in %s:\n%s", n.Name, time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(string(logs)))
		for _, want := range []string{lanName + " has address " + lanAddr, worldGreeting + " to " + n.Address + ":"} {
			if !strings.Contains(string(logs), want) {
				t.Errorf("the LAN probe on %s: its log lacks %q:\n%s", n.Name, want, logs)
			}
		}
		if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting %s: %v", name, err)
		}
	}
}

// podLogs returns the log of pod ns/name, asking for up to 2 minutes: right
// after create the API server may not reach a kubelet yet (its serving
// certificate still being approved), and answers an error.
func podLogs(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string) []byte {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		logs, err := client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err == nil {
			return logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log of pod %s/%s: %v", ns, name, err)
		}
		time.Sleep(2 * time.Second)
	}
}
