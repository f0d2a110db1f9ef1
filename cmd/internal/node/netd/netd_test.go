package netd

import (
	"context"
	"encoding/json"
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

type fakeRunner struct {
	routes string
	calls  []string
}

func (f *fakeRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	f.calls = append(f.calls, strings.Join(argv, " "))
	if argv[0] == "ip" && argv[1] == "-j" {
		return []byte(f.routes), nil
	}
	return nil, nil
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
		{netip.MustParsePrefix("10.128.2.0/23"), netip.MustParseAddr("10.66.0.12")},
		{netip.MustParsePrefix("10.128.4.0/23"), netip.MustParseAddr("10.66.0.22")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("routes = %v, want %v", got, want)
	}
	if argv := strings.Join(RouteArgv(want[0]), " "); argv != "ip route replace 10.128.2.0/23 via 10.66.0.12 proto 199" {
		t.Errorf("argv = %q", argv)
	}
}

func TestCNIConfig(t *testing.T) {
	data, err := CNIConfig(netip.MustParsePrefix("10.128.2.0/23"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type   string `json:"type"`
			IPMasq *bool  `json:"ipMasq"`
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
}

func TestReconcile(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	conf := filepath.Join(t.TempDir(), "net.d", "10-kiln.conflist")
	r := &fakeRunner{routes: `[{"dst":"10.128.2.0/23","gateway":"10.66.0.12"},{"dst":"10.128.8.0/23","gateway":"10.66.0.99"}]`}
	cfg := Config{NodeName: "m0", CNIConfPath: conf, Runner: r, Log: log}
	nodes := []*corev1.Node{
		node("m0", "10.66.0.11", "10.128.0.0/23"),
		node("m1", "10.66.0.12", "10.128.2.0/23"),
		node("w0", "10.66.0.21", "10.128.4.0/23"),
	}
	if err := reconcile(context.Background(), cfg, nodes); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ip -j route show proto 199",
		"ip route replace 10.128.4.0/23 via 10.66.0.21 proto 199",
		"ip route del 10.128.8.0/23 proto 199",
		"systemctl restart containerd.service",
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("calls =\n%s\nwant\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(conf); err != nil {
		t.Fatal(err)
	}
	// A second pass with the same state changes nothing and does not restart containerd.
	r.calls = nil
	r.routes = `[{"dst":"10.128.2.0/23","gateway":"10.66.0.12"},{"dst":"10.128.4.0/23","gateway":"10.66.0.21"}]`
	if err := reconcile(context.Background(), cfg, nodes); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.calls, []string{"ip -j route show proto 199"}) {
		t.Fatalf("second pass calls = %v", r.calls)
	}
}
