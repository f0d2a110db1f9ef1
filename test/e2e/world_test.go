package e2e

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/nodeimage"
	"github.com/kiln-project/kiln/platforms/resolvers"
)

// The simulated world: these machines are offline, and nothing may reach
// the real network, so the one connected cluster of the suite
// (networking.egress NAT) is created by a kiln that runs in a network
// namespace of its own, "the host", whose only route out is a veth into a
// second namespace, "the world", holding documentation addresses
// (198.51.100.0/24) and the servers the test needs. The host's bridge,
// machines and NAT are all inside the host namespace; nothing connects
// either namespace to the real host's, so no packet of theirs can leave
// through its uplink by construction. kiln is entered into the namespace
// with nsenter --net, which keeps /sys and the cgroup mounts preflight
// needs (ip netns exec remounts /sys).
const (
	worldNS   = "kiln-e2e-world"
	worldHost = "kiln-e2e-host"
	// worldAddr is the world's end of the veth, the host's gateway, and
	// where its web server listens.
	worldAddr = "198.51.100.1"
	// hostAddr is the host namespace's address: what the world sees of
	// every packet the host masquerades.
	hostAddr = "198.51.100.2"
	// hostUplink is the host namespace's end of the veth, its uplink.
	hostUplink = "kiln-e2e-up"
	// worldKiln is the name of the wrapper that runs kiln in the host
	// namespace; requireSealed lets it create a connected cluster.
	worldKiln = "kiln-in-the-world"
	// worldGreeting is what the world's web server answers, with the
	// address the request came from.
	worldGreeting = "hello from the world"
	// worldHTTPEnv makes the test binary serve the world's web page
	// (TestMain) instead of running tests.
	worldHTTPEnv = "KILN_E2E_WORLD_HTTP"
	// worldDNSEnv makes it serve the world's DNS (worldZone) on the
	// comma-separated addresses it names, port 53.
	worldDNSEnv = "KILN_E2E_WORLD_DNS"
	// worldNamesEnv, when set, is the names that DNS answers instead of
	// worldNames: "<name>=<IPv4>" pairs, comma-separated.
	worldNamesEnv = "KILN_E2E_WORLD_NAMES"
	// worldZone is the world's DNS zone: worldNames have worldAddr, every
	// other name there does not exist.
	worldZone = "example.test."
	// probeImage is the image of the probe program (test/e2e/probe).
	probeImage = "kiln.e2e/probe:v1"
)

// worldServers are the servers a test binary runs in a namespace of the
// world (serveWorld), as the environment names them.
type worldServers struct {
	// HTTP is the web server's address (worldHTTPEnv).
	HTTP string
	// DNS is the DNS server's addresses (worldDNSEnv), and Names what it
	// answers (worldNamesEnv; worldNames by worldAddr when empty).
	DNS, Names string
	// Registry is the registry and the proxy (worldRegistryEnv).
	Registry string
	// NTP is the time server's address (worldNTPEnv).
	NTP string
}

// worldServersFromEnv reads the servers to run from the environment;
// none when the binary runs tests.
func worldServersFromEnv() worldServers {
	return worldServers{HTTP: os.Getenv(worldHTTPEnv), DNS: os.Getenv(worldDNSEnv), Names: os.Getenv(worldNamesEnv), Registry: os.Getenv(worldRegistryEnv), NTP: os.Getenv(worldNTPEnv)}
}

// env is s as the environment of a test binary that serves it.
func (s worldServers) env() []string {
	return []string{worldHTTPEnv + "=" + s.HTTP, worldDNSEnv + "=" + s.DNS, worldNamesEnv + "=" + s.Names, worldRegistryEnv + "=" + s.Registry, worldNTPEnv + "=" + s.NTP}
}

// dnsNames is what the DNS answers: Names, or worldNames by worldAddr.
func (s worldServers) dnsNames() (map[string]netip.Addr, error) {
	names := map[string]netip.Addr{}
	if s.Names == "" {
		for _, n := range worldNames() {
			names[n] = netip.MustParseAddr(worldAddr)
		}
		return names, nil
	}
	for _, kv := range strings.Split(s.Names, ",") {
		name, addr, _ := strings.Cut(kv, "=")
		a, err := netip.ParseAddr(addr)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("%s: %q is no <name>=<IPv4>", worldNamesEnv, kv)
		}
		names[strings.ToLower(name)] = a
	}
	return names, nil
}

// serveWorld is the world's servers, run by the test binary inside a
// namespace of the world: on s.HTTP (when set) a web server whose every
// GET answers worldGreeting and the client's address, on s.DNS
// (comma-separated, when set) the DNS of worldZone, and with s.Registry
// (when set) the registry and the proxy. It never returns.
func serveWorld(s worldServers) {
	httpAddr, dnsAddrs, registry := s.HTTP, s.DNS, s.Registry
	names, err := s.dnsNames()
	if err != nil {
		fmt.Fprintln(os.Stderr, "world DNS:", err)
		os.Exit(1)
	}
	errs := make(chan error)
	if registry != "" {
		go func() { errs <- serveRegistry(registry) }()
	}
	if httpAddr != "" {
		go func() {
			errs <- http.ListenAndServe(httpAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s to %s", worldGreeting, r.RemoteAddr)
			}))
		}()
	}
	for _, a := range strings.Split(dnsAddrs, ",") {
		if a == "" {
			continue
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort(a, "53"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "world DNS:", err)
			os.Exit(1)
		}
		go func() { errs <- serveWorldDNS(pc, names) }()
	}
	if s.NTP != "" {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(s.NTP, "123"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "world NTP:", err)
			os.Exit(1)
		}
		go func() { errs <- serveWorldNTP(pc) }()
	}
	fmt.Fprintln(os.Stderr, "world server:", <-errs)
	os.Exit(1)
}

// serveWorldDNS answers the queries that reach pc: the names have their
// address, every other name NXDOMAIN.
func serveWorldDNS(pc net.PacketConn, names map[string]netip.Addr) error {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		resp := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired},
			Questions: []dnsmessage.Question{q}}
		addr, ok := names[strings.ToLower(q.Name.String())]
		switch {
		case !ok:
			resp.RCode = dnsmessage.RCodeNameError
		case q.Type == dnsmessage.TypeA:
			resp.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
				Body:   &dnsmessage.AResource{A: addr.As4()},
			}}
		}
		if out, err := resp.Pack(); err == nil {
			pc.WriteTo(out, from)
		}
	}
}

// inNS returns the command line that runs argv in network namespace ns.
func inNS(ns string, argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + ns, "--"}, argv...)
}

// startWorld builds the two namespaces, the veth between them and the
// world's web server, DNS, and registry and proxy (registry), and returns
// the wrapper that runs kiln in the host namespace. Everything goes when
// the test ends.
func startWorld(t *testing.T, kiln string, registry worldRegistry) string {
	t.Helper()
	for _, ns := range []string{worldHost, worldNS} {
		exec.Command("ip", "netns", "del", ns).Run() // a killed run's leftovers
	}
	for _, ns := range []string{worldNS, worldHost} {
		hostRun(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		hostRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	// Created inside the host namespace with its peer in the world's: the
	// real host's namespace never holds either end.
	hostRun(t, "ip", "-n", worldHost, "link", "add", hostUplink, "type", "veth", "peer", "name", "kiln-e2e-down", "netns", worldNS)
	hostRun(t, "ip", "-n", worldNS, "addr", "add", worldAddr+"/24", "dev", "kiln-e2e-down")
	hostRun(t, "ip", "-n", worldNS, "link", "set", "kiln-e2e-down", "up")
	hostRun(t, "ip", "-n", worldHost, "addr", "add", hostAddr+"/24", "dev", hostUplink)
	hostRun(t, "ip", "-n", worldHost, "link", "set", hostUplink, "up")
	hostRun(t, "ip", "-n", worldHost, "route", "add", "default", "via", worldAddr)

	// The world's DNS answers on this host's resolvers' addresses, which
	// the host namespace shares (its /etc is the host's): kiln's DNS
	// forwarder reads them there. A loopback resolver (127.0.0.53) answers
	// inside the host namespace itself, any other in the world.
	var worldDNS, hostDNS []string
	for _, r := range resolvers.Of(resolvers.ResolvConfs(), os.ReadFile) {
		host, _, _ := net.SplitHostPort(r)
		a, err := netip.ParseAddr(host)
		switch {
		case err != nil || !a.Is4():
		case a.IsLoopback():
			hostDNS = append(hostDNS, host)
		default:
			hostRun(t, "ip", "-n", worldNS, "addr", "add", host+"/32", "dev", "kiln-e2e-down")
			worldDNS = append(worldDNS, host)
		}
	}
	if len(worldDNS)+len(hostDNS) == 0 {
		t.Fatal("this host names no IPv4 resolver for the world to stand in for")
	}
	serveIn(t, worldNS, worldServers{HTTP: worldAddr + ":80", DNS: strings.Join(worldDNS, ","), Registry: registry.env()})
	if len(hostDNS) > 0 {
		serveIn(t, worldHost, worldServers{DNS: strings.Join(hostDNS, ",")})
	}

	wrapper := filepath.Join(t.TempDir(), worldKiln)
	script := fmt.Sprintf("#!/bin/sh\nexec %s %q \"$@\"\n", strings.Join(inNS(worldHost)[:3], " "), kiln)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The host reaches the world's page, and only through the veth; and
	// its proxy, which listens once the registry has its image.
	checks := map[string]string{"80": worldGreeting}
	if registry.Archive != "" {
		checks[proxyPort] = "this proxy connects only to " + mirrorHost
	}
	for port, want := range checks {
		waitAnswers(t, worldHost, worldAddr, port, want)
	}
	return wrapper
}

// waitAnswers waits up to 30 s until a GET from namespace ns to
// addr:port answers with want.
func waitAnswers(t *testing.T, ns, addr, port, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		argv := inNS(ns, "bash", "-c", "exec 3<>/dev/tcp/"+addr+"/"+port+" && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3")
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err == nil && strings.Contains(string(out), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server on %s:%s does not answer namespace %s: %v\n%s", addr, port, ns, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serveIn runs the world's servers s (serveWorld) in namespace ns until
// the test ends.
func serveIn(t *testing.T, ns string, s worldServers) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := inNS(ns, self, "-test.run=^$")
	srv := exec.Command(argv[0], argv[1:]...)
	srv.Env = append(os.Environ(), s.env()...)
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
}

// TestClusterConnected creates a cluster with networking.egress NAT inside
// the simulated world (1 master, no workers): a pod reaches the world's web
// server, and the world sees the host namespace's address (the node and
// the host both masqueraded it); a name of the world resolves in a pod;
// and the node pulls an image of a private registry through its mirror,
// the proxy and the world CA (imageMirrors, proxy and
// additionalTrustBundle: world_registry_test.go). Destroy takes the host's
// NAT away: its nftables table, the forwarding it turned on, its record.
func TestClusterConnected(t *testing.T) {
	t.Parallel()
	requireMachineHost(t)
	if os.Getenv("KILN_E2E_CLUSTER") == "0" {
		t.Skip("KILN_E2E_CLUSTER=0")
	}
	kiln := buildStaticKiln(t)
	registry := newWorldRegistry(t)
	world := startWorld(t, kiln, registry)
	dir := t.TempDir()
	writeInstallConfig(t, dir, "e2enat", 1, 0, "10.66.103.0/24", "")
	cfg := filepath.Join(dir, "install-config.yaml")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("  egress: None\n"), []byte("  egress: NAT\n"), 1)
	data = append(data, registry.installConfig(t)...)
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := runKiln(t, world, 45*time.Minute, "create", "cluster", "--dir", dir)
	infraID := readInfraID(t, dir)
	t.Cleanup(func() { assertWorldDestroyed(t, world, dir, infraID) })
	if err != nil {
		gather(t, world, dir)
		t.Fatalf("create cluster in the world: %v\n%s", err, lastLines(out, 60))
	}
	assertOutput(t, "create cluster", out, "Install complete!", "networking.egress NAT")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Time elapsed:") {
			t.Logf("MEASURE create cluster (1 master, egress NAT) in the simulated world: %s", strings.TrimSpace(l))
		}
	}

	loadProbe(t, world, dir)
	// By address, then by name: CoreDNS forwards web.example.test to the
	// node's resolver, the host's forwarder on the bridge, which asks the
	// host's resolver, in the world.
	for _, f := range []struct{ name, url string }{
		{"world", "http://" + worldAddr + "/"},
		{"world-dns", "http://web." + strings.TrimSuffix(worldZone, ".") + "/"},
	} {
		name, url := f.name, f.url
		got := fetchFromPod(t, world, dir, name, url)
		t.Logf("a pod fetching %s: %s", url, strings.TrimSpace(got.out))
		if !got.ok || !strings.Contains(got.out, worldGreeting+" to "+hostAddr+":") {
			t.Errorf("a pod of the connected cluster fetching %s: ok %v, want the greeting to %s:\n%s", url, got.ok, hostAddr, got.out)
		}
	}
	measureWorldDNS(t, world, dir)

	// The image that exists only in the world's registry, over TLS by the
	// world CA, straight (noProxy); then under a name that does not
	// resolve, from its mirror through the proxy. The probe in each
	// fetches the world's page.
	for _, p := range []struct{ name, image, how string }{
		{"registry", worldImage, "straight from " + registryHost + ", trusting the world CA"},
		{"mirrored", mirroredImage, "from " + mirrorHost + " through " + proxyHost + ", trusting the world CA"},
	} {
		got := runImage(t, world, dir, p.name, p.image, "Always", "http", "http://"+worldAddr+"/")
		t.Logf("a pod of %s: %s", p.image, strings.TrimSpace(got.out))
		if !got.ok || !strings.Contains(got.out, worldGreeting) {
			t.Errorf("a pod of %s (pulled %s): ok %v, want the greeting:\n%s", p.image, p.how, got.ok, got.out)
		}
		if ev, err := runKiln(t, world, time.Minute, "kubectl", "--dir", dir, "--", "get", "events", "--field-selector", "involvedObject.name=probe-"+p.name+",reason=Pulled", "-o", "jsonpath={.items[*].message}"); err == nil {
			t.Logf("MEASURE the pull %s: %s", p.how, ev)
		}
	}
}

// measureWorldDNS logs how long a pod's lookup of an outside name takes,
// through CoreDNS, the host's forwarder and the world's DNS (cold), and
// again from CoreDNS's cache.
func measureWorldDNS(t *testing.T, world, dir string) {
	t.Helper()
	name := "web." + worldZone // a full name: no search domain is tried first
	got := runProbe(t, world, dir, "world-dns-time", "dns", name)
	if !got.ok || !strings.Contains(got.out, worldAddr) {
		t.Errorf("a pod looking %s up: ok %v, want %s:\n%s", name, got.ok, worldAddr, got.out)
		return
	}
	t.Logf("MEASURE a pod's lookup of an outside name: %s", strings.TrimSpace(got.out))
}

// assertWorldDestroyed destroys the world's cluster and checks that the
// host namespace is as it was: no bridge, no table of kiln's, the uplink's
// forwarding back to 0, no record of it.
func assertWorldDestroyed(t *testing.T, world, dir, infraID string) {
	assertDestroyed(t, world, dir, infraID, false)
	argv := inNS(worldHost, "sh", "-c", "ip -br link; nft list tables; cat /proc/sys/net/ipv4/conf/"+hostUplink+"/forwarding")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("listing the host namespace: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		if strings.Contains(strings.ReplaceAll(l, "kiln-e2e-", ""), "kiln-") {
			t.Errorf("left in the host namespace after destroy: %s", l)
		}
	}
	if fwd := lines[len(lines)-1]; fwd != "0" {
		t.Errorf("forwarding of the uplink after destroy = %q, want 0 as before", fwd)
	}
	if _, err := os.Stat(filepath.Join(machine.DefaultEgressRecordDir, machine.EgressRecordFile)); err == nil {
		t.Errorf("%s left after the last connected cluster", machine.EgressRecordFile)
	}
}

// probeResult is what a probe pod did.
type probeResult struct {
	ok  bool   // the pod Succeeded
	out string // its log
}

// loadProbe builds the probe image and loads it into the nodes of dir's
// cluster, once for every probe pod there.
func loadProbe(t *testing.T, kiln, dir string) {
	t.Helper()
	if out, err := runKiln(t, kiln, 5*time.Minute, "load", "image-archive", probeArchive(t), "--dir", dir); err != nil {
		t.Fatalf("load image-archive: %v\n%s", err, lastLines(out, 20))
	}
}

// fetchFromPod runs a pod of the probe image (loadProbe) that fetches url,
// named probe-<name>; it returns how the pod ended.
func fetchFromPod(t *testing.T, kiln, dir, name, url string) probeResult {
	t.Helper()
	return runProbe(t, kiln, dir, name, "http", url)
}

// runProbe runs a pod of the probe image (loadProbe) named probe-<name>
// with the probe's args; it returns how the pod ended.
func runProbe(t *testing.T, kiln, dir, name string, probeArgs ...string) probeResult {
	t.Helper()
	return runImage(t, kiln, dir, name, probeImage, "Never", probeArgs...)
}

// runImage runs the probe of image (the probe image under any name) in a
// pod named probe-<name> with the probe's args and pull policy; it returns
// how the pod ended.
func runImage(t *testing.T, kiln, dir, name, image, pullPolicy string, probeArgs ...string) probeResult {
	t.Helper()
	pod := "probe-" + name
	kubectl := func(timeout time.Duration, args ...string) (string, error) {
		return runKiln(t, kiln, timeout, append([]string{"kubectl", "--dir", dir, "--"}, args...)...)
	}
	run := append([]string{"run", pod, "--image=" + image, "--image-pull-policy=" + pullPolicy, "--restart=Never",
		`--overrides={"spec":{"tolerations":[{"operator":"Exists"}]}}`, "--command", "--", "/probe"}, probeArgs...)
	if out, err := kubectl(time.Minute, run...); err != nil {
		t.Fatalf("kubectl run %s: %v\n%s", pod, err, out)
	}
	t.Cleanup(func() { kubectl(time.Minute, "delete", "pod", pod, "--wait=false") })
	deadline := time.Now().Add(3 * time.Minute)
	for {
		phase, err := kubectl(time.Minute, "get", "pod", pod, "-o", "jsonpath={.status.phase}")
		if err == nil && (phase == "Succeeded" || phase == "Failed") {
			logs, _ := kubectl(time.Minute, "logs", pod)
			return probeResult{ok: phase == "Succeeded", out: logs}
		}
		if time.Now().After(deadline) {
			desc, _ := kubectl(time.Minute, "describe", "pod", pod)
			t.Fatalf("pod %s did not end in 3m (phase %q, %v):\n%s", pod, phase, err, lastLines(desc, 30))
		}
		time.Sleep(2 * time.Second)
	}
}

// assertSealedPod checks, in a sealed cluster, that a pod's request to the
// world's address fails at once, in the cluster (no route out of the
// node), without waiting for a timeout: nothing was sent to be dropped;
// that a name outside the cluster is refused by CoreDNS at once; and that
// the world's image does not pull, and says so fast.
func assertSealedPod(t *testing.T, kiln, dir string) {
	t.Helper()
	loadProbe(t, kiln, dir)
	got := fetchFromPod(t, kiln, dir, "sealed", "http://"+worldAddr+"/")
	t.Logf("a pod of a sealed cluster fetching %s: %s", worldAddr, strings.TrimSpace(got.out))
	if got.ok || !strings.Contains(got.out, "unreachable") {
		t.Errorf("a pod of a sealed cluster fetching %s: ok %v, want it refused at once (unreachable):\n%s", worldAddr, got.ok, got.out)
	}
	name := "web." + worldZone
	got = runProbe(t, kiln, dir, "sealed-dns", "dns", name)
	t.Logf("a pod of a sealed cluster looking %s up: %s", name, strings.TrimSpace(got.out))
	if got.ok || !strings.Contains(got.out, "server misbehaving") {
		t.Errorf("a pod of a sealed cluster looking %s up: ok %v, want CoreDNS to refuse it at once (server misbehaving):\n%s", name, got.ok, got.out)
	}
	assertPullFails(t, kiln, dir, "sealed-pull", worldImage)
}

// assertPullFails runs a pod of image named probe-<name> and checks that
// its pull fails within a minute (the container waits with reason
// "ErrImagePull" or "ImagePullBackOff"), logging how long that
// took and why.
func assertPullFails(t *testing.T, kiln, dir, name, image string) {
	t.Helper()
	pod := "probe-" + name
	kubectl := func(args ...string) (string, error) {
		return runKiln(t, kiln, time.Minute, append([]string{"kubectl", "--dir", dir, "--"}, args...)...)
	}
	start := time.Now()
	if out, err := kubectl("run", pod, "--image="+image, "--image-pull-policy=Always", "--restart=Never",
		`--overrides={"spec":{"tolerations":[{"operator":"Exists"}]}}`); err != nil {
		t.Fatalf("kubectl run %s: %v\n%s", pod, err, out)
	}
	t.Cleanup(func() { kubectl("delete", "pod", pod, "--wait=false") })
	for {
		out, err := kubectl("get", "pod", pod, "-o", `jsonpath={.status.phase} {.status.containerStatuses[0].state.waiting.reason} {.status.containerStatuses[0].state.waiting.message}`)
		if f := strings.Fields(out); err == nil && len(f) > 1 && (f[1] == "ErrImagePull" || f[1] == "ImagePullBackOff") {
			t.Logf("MEASURE a sealed cluster's pull of %s failed after %s: %s", image, time.Since(start).Round(100*time.Millisecond), out)
			return
		}
		if err == nil && (strings.HasPrefix(out, "Running") || strings.HasPrefix(out, "Succeeded")) {
			t.Errorf("a sealed cluster pulled %s: %s", image, out)
			return
		}
		if time.Since(start) > time.Minute {
			t.Errorf("a sealed cluster's pull of %s did not fail within a minute: %v %s", image, err, out)
			return
		}
		time.Sleep(time.Second)
	}
}

// probeArchive builds test/e2e/probe static and packs it into a
// docker-archive holding the image probeImage, for kiln load image-archive.
func probeArchive(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./probe: %v\n%s", err, out)
	}
	archive := filepath.Join(tmp, "probe.tar")
	images := []nodeimage.ArchiveImage{{Ref: probeImage, Layers: []string{"probe"}, Entrypoint: []string{"/probe"}}}
	err := nodeimage.WriteDockerArchive(archive, images, func(string) ([]nodeimage.LayerEntry, string, error) {
		return []nodeimage.LayerEntry{{Name: "probe", Source: bin, Mode: 0o755}}, "kiln e2e: probe", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return archive
}
