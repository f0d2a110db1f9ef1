package servicelb

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPoolFor(t *testing.T) {
	tests := []struct {
		cidr, first, last string
		size              int
	}{
		{"10.66.0.0/24", "10.66.0.192", "10.66.0.254", 63},
		{"10.66.140.7/24", "10.66.140.192", "10.66.140.254", 63},
		{"10.66.0.0/23", "10.66.1.128", "10.66.1.254", 127},
		{"10.66.0.16/28", "10.66.0.28", "10.66.0.30", 3},
	}
	for _, tt := range tests {
		p, err := PoolFor(netip.MustParsePrefix(tt.cidr))
		if err != nil || p.First.String() != tt.first || p.Last.String() != tt.last || p.Size() != tt.size {
			t.Errorf("PoolFor(%s) = %s (%d), %v; want %s-%s (%d)", tt.cidr, p, p.Size(), err, tt.first, tt.last, tt.size)
		}
	}
	for _, bad := range []string{"10.66.0.0/29", "fd00::/64"} {
		if _, err := PoolFor(netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("PoolFor(%s) succeeded", bad)
		}
	}
	p := Pool{First: netip.MustParseAddr("10.0.0.10"), Last: netip.MustParseAddr("10.0.0.12")}
	used := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.10"): true}
	if a, ok := p.allocate(used); !ok || a.String() != "10.0.0.11" {
		t.Errorf("allocate = %s %v, want 10.0.0.11", a, ok)
	}
	used[netip.MustParseAddr("10.0.0.11")], used[netip.MustParseAddr("10.0.0.12")] = true, true
	if a, ok := p.allocate(used); ok {
		t.Errorf("allocate from a full pool = %s", a)
	}
	if err := (Pool{First: p.Last, Last: p.First}).Validate(); err == nil {
		t.Error("a reversed pool is valid")
	}
}

// fakeRunner answers `ip` commands from a list of addresses.
type fakeRunner struct {
	mu    sync.Mutex
	addrs []string
	argv  [][]string
}

func (r *fakeRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.argv = append(r.argv, argv)
	switch {
	case slices.Equal(argv[:3], []string{"ip", "-o", "-4"}):
		var b strings.Builder
		b.WriteString("5: kiln-x    inet 10.66.0.1/24 brd 10.66.0.255 scope global kiln-x\\       valid_lft forever preferred_lft forever\n")
		for _, a := range r.addrs {
			b.WriteString("5: kiln-x    inet " + a + " scope global kiln-x\\       valid_lft forever preferred_lft forever\n")
		}
		return []byte(b.String()), nil
	case argv[2] == "add":
		r.addrs = append(r.addrs, argv[3])
	case argv[2] == "del":
		r.addrs = slices.DeleteFunc(r.addrs, func(a string) bool { return a == argv[3] })
	}
	return nil, nil
}

func TestBridgeAddresses(t *testing.T) {
	r := &fakeRunner{addrs: []string{"10.66.0.200/32"}}
	b := BridgeAddresses{Run: r, Bridge: "kiln-x"}
	ctx := context.Background()
	a, existing := netip.MustParseAddr("10.66.0.192"), netip.MustParseAddr("10.66.0.200")
	for _, step := range []func() error{
		func() error { return b.Add(ctx, a) },
		func() error { return b.Add(ctx, a) }, // already there: no second add
		func() error { return b.Del(ctx, existing) },
		func() error { return b.Del(ctx, existing) }, // already gone: no second del
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	var changes []string
	for _, argv := range r.argv {
		if argv[1] != "-o" {
			changes = append(changes, strings.Join(argv, " "))
		} else if got := strings.Join(argv, " "); got != "ip -o -4 addr show dev kiln-x" {
			t.Errorf("list argv %q", got)
		}
	}
	want := []string{"ip addr add 10.66.0.192/32 dev kiln-x", "ip addr del 10.66.0.200/32 dev kiln-x"}
	if !slices.Equal(changes, want) {
		t.Errorf("commands %q, want %q", changes, want)
	}
	got, err := b.List(ctx)
	if err != nil || len(got) != 1 || got[0] != a {
		t.Errorf("List = %v, %v; want only %s (the bridge's /24 is not a Service address)", got, err, a)
	}
}

func TestProxyConfig(t *testing.T) {
	svc := lbService("web", 0, 80, 30080)
	svc.Spec.Ports = append(svc.Spec.Ports,
		corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
		corev1.ServicePort{Name: "no-node-port", Protocol: corev1.ProtocolTCP, Port: 81})
	cfg := ProxyConfig(svc, netip.MustParseAddr("10.66.0.192"), []string{"10.66.0.11", "10.66.0.20"},
		Limits{IdleTimeout: DefaultIdleTimeout, MaxConns: DefaultMaxConns})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "10.66.0.192" || len(cfg.Services) != 1 {
		t.Fatalf("config %+v: want one TCP port on 10.66.0.192", cfg)
	}
	s := cfg.Services[0]
	if s.Port != 80 || s.Health != "tcp" || !slices.Equal(s.Backends, []string{"10.66.0.11:30080", "10.66.0.20:30080"}) {
		t.Errorf("service %+v", s)
	}
	if s.IdleTimeoutMillis != 600_000 || s.MaxConns != 1024 {
		t.Errorf("limits: idle %d ms, at most %d connections; want 600000 ms and 1024", s.IdleTimeoutMillis, s.MaxConns)
	}
	if s := ProxyConfig(svc, netip.MustParseAddr("10.66.0.192"), nil, Limits{IdleTimeout: time.Microsecond}).Services[0]; s.IdleTimeoutMillis != 1 {
		t.Errorf("a 1 µs idle timeout became %d ms, want 1 (0 would be none)", s.IdleTimeoutMillis)
	}
}

// TestController runs the controller against a fake API with real
// listeners on loopback addresses: a Service gets the first free address,
// its status shows it and a connection to it reaches the node port of the
// machine at the address kiln assigned it; a Service that had an address
// keeps it; deleting a Service or changing its type releases its address;
// stopping removes every address.
func TestController(t *testing.T) {
	backend := httptest(t, "127.0.0.2", "hello from the node port")
	nodePort := backend.Addr().(*net.TCPAddr).Port
	port := freePort(t)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	kept := lbService("kept", 1, port, int32(nodePort))
	kept.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.202"}}
	client := fake.NewClientset(node, kept, lbService("web", 2, port, int32(nodePort)))
	r := &fakeRunner{addrs: []string{"127.0.0.201/32"}} // stale: no Service holds it
	pool := Pool{First: netip.MustParseAddr("127.0.0.200"), Last: netip.MustParseAddr("127.0.0.203")}
	c := &Controller{Client: client, Addrs: BridgeAddresses{Run: r, Bridge: "kiln-x"}, Pool: pool, Log: testLog(t),
		Machines: staticMachines(map[string]string{"n1": "127.0.0.2"})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	waitFor(t, "web gets 127.0.0.200, kept keeps 127.0.0.202", func() bool {
		return ingressIP(t, client, "web") == "127.0.0.200" && ingressIP(t, client, "kept") == "127.0.0.202" &&
			slices.Equal(sorted(r), []string{"127.0.0.200/32", "127.0.0.202/32"})
	})
	url := "http://127.0.0.200:" + strconv.Itoa(int(port)) + "/"
	waitFor(t, "GET "+url+" reaches the node port", func() bool { return get(url) == "hello from the node port" })

	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "web's address released", func() bool {
		return slices.Equal(sorted(r), []string{"127.0.0.202/32"}) && get(url) == ""
	})

	svc, err := client.CoreV1().Services("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type = corev1.ServiceTypeNodePort
	if _, err := client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "kept's address released and its status cleared", func() bool {
		return len(sorted(r)) == 0 && ingressIP(t, client, "kept") == ""
	})

	if _, err := client.CoreV1().Services("default").Create(ctx, lbService("again", 3, port, int32(nodePort)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new Service gets the lowest free address", func() bool { return ingressIP(t, client, "again") == "127.0.0.200" })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil
	if got := sorted(r); len(got) != 0 {
		t.Errorf("addresses left after stop: %v", got)
	}
}

func lbService(name string, age, port, nodePort int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(time.Unix(1700000000+int64(age), 0))},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, NodePort: nodePort}},
		},
	}
}

func ingressIP(t *testing.T, client *fake.Clientset, name string) string {
	t.Helper()
	svc, err := client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return ""
	}
	return svc.Status.LoadBalancer.Ingress[0].IP
}

func sorted(r *fakeRunner) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.addrs)
	slices.Sort(out)
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(url string) string {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// httptest serves body on a free port of the loopback address ip until the
// test ends.
func httptest(t *testing.T, ip, body string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Log(err)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	return ln
}

// freePort returns a port free on the pool's loopback addresses.
func freePort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.200:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

func testLog(t *testing.T) logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	if testing.Verbose() {
		l.SetOutput(testWriter{t})
	}
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestProcessAndFiles(t *testing.T) {
	dir := t.TempDir()
	p := Process("/usr/bin/kiln", dir)
	want := []string{"/usr/bin/kiln", "--dir", dir, "service-lb", "--config", dir + "/service-lb.json", "--pid-file", dir + "/service-lb.pid"}
	if got := p.Command(); !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	if _, err := p.PID(); err == nil {
		t.Error("PID of a process never started")
	}
	pool := Pool{First: netip.MustParseAddr("10.66.0.192"), Last: netip.MustParseAddr("10.66.0.254")}
	machines := Machines{Network: netip.MustParsePrefix("10.66.0.0/24"), Host: netip.MustParseAddr("10.66.0.1"),
		Addresses: map[string]netip.Addr{"demo-x7k2p-master-0": netip.MustParseAddr("10.66.0.11")}}
	if err := WriteFiles(dir, Config{Bridge: "kiln-x", Pool: pool, Machines: machines}, []byte("apiVersion: v1\n")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ConfigFile, KubeconfigFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st, err)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Kubeconfig != filepath.Join(dir, KubeconfigFile) || cfg.Pool != pool || cfg.Bridge != "kiln-x" ||
		cfg.Machines.String() != "demo-x7k2p-master-0=10.66.0.11" {
		t.Errorf("config %s: %+v %v", data, cfg, err)
	}
	if err := WriteFiles(dir, Config{Pool: pool, Machines: machines}, nil); err == nil {
		t.Error("a config without a bridge was written")
	}
	if err := WriteFiles(dir, Config{Bridge: "kiln-x", Pool: pool}, nil); err == nil {
		t.Error("a config without machines was written")
	}
}
