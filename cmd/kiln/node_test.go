package main

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/tls/tlstest"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/node/netd"
)

// A kubeconfig naming the kubelet's client certificate, as the kubelet's
// TLS bootstrap writes it.
const testNodeKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.66.0.1:6443"}}]
users: [{name: u, user: {client-certificate: CERT, client-key: CERT}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

// testCert is a throwaway certificate and its key, PEM, in one file.
func testCert(t *testing.T) string {
	ck := tlstest.CA(t)
	return string(ck.Cert) + string(ck.Key)
}

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func TestAwaitNodeClientWaitsForTheKubeletsCredentials(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cert := filepath.Join(dir, "kubelet-client-current.pem")
	done := make(chan error, 1)
	go func() {
		_, err := awaitNodeClient(context.Background(), kubeconfig, 5*time.Millisecond, quietLog())
		done <- err
	}()
	// Neither file yet, then an empty kubeconfig (the kubelet writes it in
	// place, so netd may read it between its create and its write), then
	// the kubeconfig without its certificate: still waiting.
	for _, step := range []func(){
		func() {},
		func() { writeTestFile(t, kubeconfig, "") },
		func() { writeTestFile(t, kubeconfig, replaceCert(cert)) },
	} {
		step()
		select {
		case err := <-done:
			t.Fatalf("returned (%v) before the credentials existed", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	writeTestFile(t, cert, testCert(t))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("once the credentials exist: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not return once the credentials existed")
	}
}

func TestAwaitNodeClientFailsAtOnceOnABrokenKubeconfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeTestFile(t, kubeconfig, "not: [yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := awaitNodeClient(ctx, kubeconfig, time.Millisecond, quietLog()); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the parse error at once, got %v", err)
	}
}

func TestAwaitNodeClientEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := awaitNodeClient(ctx, filepath.Join(t.TempDir(), "kubeconfig"), time.Millisecond, quietLog())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the context's error, got %v", err)
	}
}

func replaceCert(cert string) string { return strings.ReplaceAll(testNodeKubeconfig, "CERT", cert) }

func writeTestFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSetNetdNetwork(t *testing.T) {
	tests := []struct {
		networkType, nodeIP string
		wantIP              netip.Addr
		wantErr             bool
	}{
		{types.NetworkTypeKilnBridge, "", netip.Addr{}, false},
		{types.NetworkTypeKilnVXLAN, "10.66.0.11", netip.MustParseAddr("10.66.0.11"), false},
		{"Calico", "", netip.Addr{}, true},
		{types.NetworkTypeKilnVXLAN, "fd00::1", netip.Addr{}, true},
		{types.NetworkTypeKilnVXLAN, "node0", netip.Addr{}, true},
	}
	for _, tt := range tests {
		cfg := netd.Config{NetworkType: tt.networkType}
		err := setNetdNetwork(&cfg, tt.nodeIP)
		if isInput := err != nil && exitcode.Of(err) == exitcode.Input; isInput != tt.wantErr {
			t.Errorf("%s %q: %v, want an input error: %v", tt.networkType, tt.nodeIP, err, tt.wantErr)
		}
		if cfg.NodeIP != tt.wantIP {
			t.Errorf("%s %q: node IP %s, want %s", tt.networkType, tt.nodeIP, cfg.NodeIP, tt.wantIP)
		}
	}
}

func TestSetNetdEgress(t *testing.T) {
	tests := []struct {
		mode, service string
		clusters      []string
		wantErr       string // part of the error; "" for none
	}{
		{types.EgressNAT, "172.30.0.0/16", []string{"10.128.0.0/14"}, ""},
		{types.EgressNone, "", nil, ""},
		{types.EgressNAT, "", nil, "--egress: egress NAT needs"},
		{"Open", "", nil, `--egress: egress "Open"`},
		{types.EgressNAT, "172.30.0.0/16", []string{"pods", "fd00::/64"}, `--cluster-network: "pods"`},
		{types.EgressNAT, "services", []string{"10.128.0.0/14"}, `--service-network: "services"`},
	}
	for _, tt := range tests {
		e := netd.Egress{Mode: tt.mode}
		err := setNetdEgress(&e, tt.clusters, tt.service)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s %q %s: %v", tt.mode, tt.clusters, tt.service, err)
		case tt.wantErr != "" && (err == nil || exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s %q %s: %v, want an input error with %q", tt.mode, tt.clusters, tt.service, err, tt.wantErr)
		}
	}
	e := netd.Egress{Mode: types.EgressNAT}
	if err := setNetdEgress(&e, []string{"10.128.0.7/14"}, "172.30.0.0/16"); err != nil || e.ClusterNetworks[0] != netip.MustParsePrefix("10.128.0.0/14") {
		t.Errorf("cluster networks %v, %v; want them masked", e.ClusterNetworks, err)
	}
}
