package servicelb

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// staticMachines returns machines on the loopback network 127.0.0.0/8
// (the host at 127.0.0.1), for controllers whose backends listen there.
func staticMachines(addrs map[string]string) func() (Machines, error) {
	m := Machines{Network: netip.MustParsePrefix("127.0.0.0/8"), Host: netip.MustParseAddr("127.0.0.1"),
		Addresses: map[string]netip.Addr{}}
	for n, a := range addrs {
		m.Addresses[n] = netip.MustParseAddr(a)
	}
	return func() (Machines, error) { return m, nil }
}

// nodeList is a cacheLister of fixed Nodes.
type nodeList []*corev1.Node

func (l nodeList) List() []any {
	out := make([]any, len(l))
	for i, n := range l {
		out[i] = n
	}
	return out
}

// node is a Node that reports internalIP, Ready or not.
func node(name, internalIP string, ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

// testMachines is a cluster on 10.66.0.0/24 as a kiln plan lays it out,
// plus machines whose addresses no plan would give (a damaged or forged
// configuration): the controller must not proxy to them either.
func testMachines() Machines {
	m := Machines{Network: netip.MustParsePrefix("10.66.0.0/24"), Host: netip.MustParseAddr("10.66.0.1"),
		Addresses: map[string]netip.Addr{}}
	for n, a := range map[string]string{
		"demo-master-0": "10.66.0.11", "demo-master-1": "10.66.0.12", "demo-worker-0": "10.66.0.20",
		"outside": "10.67.0.5", "on-the-host": "10.66.0.1", "in-the-pool": "10.66.0.200",
		"broadcast": "10.66.0.255", "loopback": "127.0.0.1",
	} {
		m.Addresses[n] = netip.MustParseAddr(a)
	}
	return m
}

// TestBackendsAreTheAssignedAddresses: the controller proxies to the
// address kiln assigned each machine, whatever its Node reports; a Node
// that is no machine, or whose machine's address is no machine address,
// gets nothing. Each such Node is logged once, not on every pass.
func TestBackendsAreTheAssignedAddresses(t *testing.T) {
	nodes := nodeList{
		node("demo-master-0", "10.66.0.11", true),
		node("demo-worker-0", "127.0.0.1", true), // a machine that reports loopback: traffic still goes to .20
		node("demo-master-1", "10.66.0.12", false),
		node("intruder", "10.66.0.30", true),     // no machine of the cluster
		node("host-aimer", "127.0.0.1", true),    // no machine, aims at the host's loopback
		node("host-address", "10.66.0.1", true),  // no machine, aims at the host's bridge address
		node("outside", "10.67.0.5", true),       // machine outside the machine network
		node("on-the-host", "10.66.0.1", true),   // machine at the host's address
		node("in-the-pool", "10.66.0.200", true), // machine in the LoadBalancer pool
		node("broadcast", "10.66.0.255", true),
		node("loopback", "127.0.0.1", true),
	}
	log, hook := logtest.NewNullLogger()
	pool, _ := PoolFor(netip.MustParsePrefix("10.66.0.0/24"))
	c := &Controller{Pool: pool, Log: log, nodes: nodes}

	got := c.backends(testMachines())
	if want := []string{"10.66.0.11", "10.66.0.20"}; !slices.Equal(got, want) {
		t.Errorf("backends = %q, want %q", got, want)
	}
	warned := map[string]bool{}
	for _, e := range hook.AllEntries() {
		name := strings.Fields(e.Message)[1]
		if e.Level != logrus.WarnLevel || warned[name] {
			t.Errorf("unexpected log line %q", e.Message)
		}
		warned[name] = true
	}
	for _, n := range []string{"demo-worker-0", "intruder", "host-aimer", "host-address", "outside", "on-the-host", "in-the-pool", "broadcast", "loopback"} {
		if !warned[n] {
			t.Errorf("no warning names Node %s", n)
		}
	}
	if warned["demo-master-0"] || warned["demo-master-1"] {
		t.Error("a warning names a Node that is in order")
	}

	hook.Reset()
	if again := c.backends(testMachines()); !slices.Equal(again, got) || len(hook.AllEntries()) > 0 {
		t.Errorf("second pass: backends %q, %d log lines; want the same backends and no line", again, len(hook.AllEntries()))
	}
	if none := c.backends(Machines{}); len(none) != 0 {
		t.Errorf("without machines: backends %q, want none", none)
	}
}

func TestMachinesValidate(t *testing.T) {
	valid := func() Machines {
		return Machines{Network: netip.MustParsePrefix("10.66.0.0/24"), Host: netip.MustParseAddr("10.66.0.1"),
			Addresses: map[string]netip.Addr{"m0": netip.MustParseAddr("10.66.0.11"), "w0": netip.MustParseAddr("10.66.0.20")}}
	}
	tests := []struct {
		name   string
		change func(*Machines)
		want   []string // substrings of the error; none when valid
	}{
		{"valid", func(*Machines) {}, nil},
		{"no machines", func(m *Machines) { m.Addresses = nil }, []string{"addresses: required"}},
		{"loopback network", func(m *Machines) {
			m.Network, m.Host = netip.MustParsePrefix("127.0.0.0/8"), netip.MustParseAddr("127.0.0.1")
			m.Addresses = map[string]netip.Addr{"m0": netip.MustParseAddr("127.0.0.2")}
		}, []string{"network: 127.0.0.0/8 cannot be a machine network"}},
		{"every bad address", func(m *Machines) {
			m.Addresses["out"] = netip.MustParseAddr("192.168.1.1")
			m.Addresses["host"] = netip.MustParseAddr("10.66.0.1")
			m.Addresses["bcast"] = netip.MustParseAddr("10.66.0.255")
			m.Addresses["twin"] = netip.MustParseAddr("10.66.0.20")
			m.Addresses["none"] = netip.Addr{}
		}, []string{"addresses[out]: 192.168.1.1 is not in the machine network", "addresses[host]: 10.66.0.1 is the host's",
			"addresses[bcast]", "10.66.0.20 is also", "addresses[none]"}},
		{"host outside", func(m *Machines) { m.Host = netip.MustParseAddr("10.0.0.1") }, []string{"host: 10.0.0.1 is not in network"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid()
			tt.change(&m)
			err := m.Validate()
			if (err == nil) != (len(tt.want) == 0) {
				t.Fatalf("Validate = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestMachineFileFollowsRewrites: the running controller's machines follow
// the configuration file kiln rewrites, and a damaged rewrite keeps the
// machines read before.
func TestMachineFileFollowsRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), ConfigFile)
	write := func(m Machines) {
		data, err := json.Marshal(Config{Machines: m})
		if err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.Write(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &machineFile{path: path}
	m := testMachines()
	m.Addresses = map[string]netip.Addr{"demo-master-0": netip.MustParseAddr("10.66.0.11")}
	write(m)
	if got, err := f.Machines(); err != nil || got.String() != "demo-master-0=10.66.0.11" {
		t.Fatalf("Machines = %s, %v", got, err)
	}
	m.Addresses["demo-worker-0"] = netip.MustParseAddr("10.66.0.20")
	write(m)
	if got, err := f.Machines(); err != nil || got.String() != "demo-master-0=10.66.0.11, demo-worker-0=10.66.0.20" {
		t.Fatalf("after a scale: Machines = %s, %v", got, err)
	}
	if err := os.WriteFile(path, []byte(`{"machines": {"network": "127.0.0.0/8"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Machines(); err == nil || got.String() != "demo-master-0=10.66.0.11, demo-worker-0=10.66.0.20" {
		t.Errorf("after a damaged rewrite: Machines = %s, %v; want the last good list and an error", got, err)
	}
}

// echoOn echoes every connection on a free port of the loopback address ip.
func echoOn(t *testing.T, ip string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ln
}

// echoes sends msg on c and reports whether it came back.
func echoes(c net.Conn, msg string) bool {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return false
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == msg
}

// TestControllerLimits: the controller's proxies close a connection idle
// both ways for its idle timeout, and refuse connections past its cap
// until one closes (short limits injected; loopback only).
func TestControllerLimits(t *testing.T) {
	const idle = 300 * time.Millisecond
	backend := echoOn(t, "127.0.0.2")
	nodePort := int32(backend.Addr().(*net.TCPAddr).Port)
	port := freePort(t)
	client := fake.NewClientset(node("n1", "127.0.0.1", true), lbService("echo", 1, port, nodePort))
	pool := Pool{First: netip.MustParseAddr("127.0.0.200"), Last: netip.MustParseAddr("127.0.0.203")}
	c := &Controller{Client: client, Addrs: BridgeAddresses{Run: &fakeRunner{}, Bridge: "kiln-x"}, Pool: pool, Log: testLog(t),
		Machines: staticMachines(map[string]string{"n1": "127.0.0.2"}), IdleTimeout: idle, MaxConns: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	addr := net.JoinHostPort("127.0.0.200", strconv.Itoa(int(port)))
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return nil
		}
		if !echoes(conn, "hi") {
			conn.Close()
			return nil
		}
		return conn
	}
	var first net.Conn
	waitFor(t, "a connection through "+addr+" to the echo node port", func() bool { first = dial(); return first != nil })
	defer first.Close()

	if second := dial(); second != nil {
		second.Close()
		t.Fatal("a second connection was served past the cap of 1")
	}
	first.Close()
	var third net.Conn
	waitFor(t, "a connection served once the first closed", func() bool { third = dial(); return third != nil })
	defer third.Close()

	start := time.Now()
	third.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, third); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle connection still open after 5 s (idle timeout %s)", idle)
	}
	if took := time.Since(start); took < idle*3/4 {
		t.Errorf("closed after %s, before the idle timeout of %s", took, idle)
	}
}
