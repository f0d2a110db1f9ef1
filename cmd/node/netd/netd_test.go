package netd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, ip, cidr string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	if cidr != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
	}
	return n
}

// fakeRunner records each command and answers the listings in out.
type fakeRunner struct {
	out   map[string]string // command line -> its output
	fail  map[string]bool   // command lines that exit non-zero
	calls []string
}

func (f *fakeRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	cmd := strings.Join(argv, " ")
	f.calls = append(f.calls, cmd)
	if f.fail[cmd] {
		return []byte(f.out[cmd]), errors.New("exit status 2")
	}
	return []byte(f.out[cmd]), nil
}

// listRoutes is netd's listing of the routes it owns.
const listRoutes = "ip -j route show proto 199"

func quietLog() *logrus.Logger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return log
}

// checkCalls compares the commands r ran with want.
func checkCalls(t *testing.T, r *fakeRunner, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("calls =\n%s\nwant\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}
	r.calls = nil
}

func TestDesiredRoutes(t *testing.T) {
	nodes := []*corev1.Node{
		node("m0", "10.66.0.11", "10.128.0.0/23"),
		node("m1", "10.66.0.12", "10.128.2.0/23"),
		node("w0", "10.66.0.21", ""),    // no podCIDR yet
		node("w1", "", "10.128.6.0/23"), // no address yet
		node("w2", "10.66.0.22", "10.128.4.0/23"),
	}
	got := DesiredRoutes("m0", nodes)
	want := []Route{
		{Dst: netip.MustParsePrefix("10.128.2.0/23"), Via: netip.MustParseAddr("10.66.0.12")},
		{Dst: netip.MustParsePrefix("10.128.4.0/23"), Via: netip.MustParseAddr("10.66.0.22")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("routes = %v, want %v", got, want)
	}
	if argv := strings.Join(RouteArgv(want[0]), " "); argv != "ip route replace 10.128.2.0/23 via 10.66.0.12 proto 199" {
		t.Errorf("argv = %q", argv)
	}
}

func TestCNIConfig(t *testing.T) {
	data, err := CNIConfig(netip.MustParsePrefix("10.128.2.0/23"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type   string `json:"type"`
			IPMasq *bool  `json:"ipMasq"`
			MTU    *int   `json:"mtu"`
			IPAM   struct {
				Ranges [][]struct{ Subnet string } `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if conf.CNIVersion != "1.0.0" || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.128.2.0/23" {
		t.Fatalf("conf = %+v", conf)
	}
	if conf.Plugins[0].IPMasq == nil || *conf.Plugins[0].IPMasq {
		t.Error("pod traffic between nodes must not be masqueraded")
	}
	if conf.Plugins[0].MTU != nil {
		t.Errorf("KilnBridge sets the bridge's MTU: %d", *conf.Plugins[0].MTU)
	}
}

func TestReconcile(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "net.d", "10-kiln.conflist")
	r := &fakeRunner{out: map[string]string{
		listRoutes: `[{"dst":"10.128.2.0/23","gateway":"10.66.0.12"},{"dst":"10.128.8.0/23","gateway":"10.66.0.99"}]`,
	}}
	cfg := Config{NodeName: "m0", CNIConfPath: conf, Runner: r, Log: quietLog()}
	nodes := []*corev1.Node{
		node("m0", "10.66.0.11", "10.128.0.0/23"),
		node("m1", "10.66.0.12", "10.128.2.0/23"),
		node("w0", "10.66.0.21", "10.128.4.0/23"),
	}
	if err := reconcile(context.Background(), cfg, nodes); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r,
		listRoutes,
		"ip route replace 10.128.4.0/23 via 10.66.0.21 proto 199",
		"ip route del 10.128.8.0/23 proto 199",
		"systemctl restart containerd.service",
	)
	if _, err := os.Stat(conf); err != nil {
		t.Fatal(err)
	}
	// A second pass with the same state changes nothing and does not restart containerd.
	r.out[listRoutes] = `[{"dst":"10.128.2.0/23","gateway":"10.66.0.12"},{"dst":"10.128.4.0/23","gateway":"10.66.0.21"}]`
	if err := reconcile(context.Background(), cfg, nodes); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, r, listRoutes)
}
