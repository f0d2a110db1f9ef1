package ignitionconfigs_test

import (
	"crypto/x509"
	"encoding/pem"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// TestSSHNodesUseTheirOwnProxy generates the configs of the ssh example
// install-config: the nodes reach the machine-config server and the API
// through the proxy on their own loopback interface (6444 and 22624),
// never at api-int, which no DNS of the user needs to resolve, and the
// machine-config server's certificate names localhost for them.
func TestSSHNodesUseTheirOwnProxy(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../docs/examples/install-config-ssh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	persist(t, dir, targets.IgnitionConfigs())
	for _, role := range []string{"master", "worker"} {
		raw, err := os.ReadFile(filepath.Join(dir, installdir.Ignition(role)))
		if err != nil {
			t.Fatal(err)
		}
		c := parse(t, raw)
		if len(c.Ignition.Config.Merge) != 1 || c.Ignition.Config.Merge[0].Source == nil ||
			*c.Ignition.Config.Merge[0].Source != "https://localhost:22624/config/"+role {
			t.Errorf("%s.ign merges %+v, want https://localhost:22624/config/%s", role, c.Ignition.Config.Merge, role)
		}
	}
	boot := bootstrapIn(t, dir)
	block, _ := pem.Decode(fileOf(t, boot, nodelayout.MCSConfigDir+"/tls.crt"))
	if block == nil {
		t.Fatal("the machine-config server's certificate holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cert.DNSNames, "localhost") || !slices.Contains(cert.DNSNames, "api-int.rack.example.com") {
		t.Errorf("machine-config server certificate names %q, want localhost and api-int", cert.DNSNames)
	}
	// Nothing a node runs reaches api-int, which the hosts cannot resolve:
	// kubelet's bootstrap kubeconfig, kube-proxy, the network policy
	// agent and the CSR approver reach the API at localhost:6444.
	configs := everyMachine(t, boot)
	proxied := map[string]bool{}
	for role, c := range configs {
		for _, f := range c.Storage.Files {
			data, ok, err := ignition.FileContents(c, f.Path)
			if err != nil || !ok {
				continue
			}
			if strings.Contains(string(data), "//api-int.rack.example.com") {
				t.Errorf("%s config: %s reaches something at api-int", role, f.Path)
			}
			if strings.Contains(string(data), "server: https://localhost:6444") {
				proxied[role+":"+path.Base(f.Path)] = true
			}
		}
	}
	for _, want := range []string{"master:bootstrap-kubeconfig", "worker:bootstrap-kubeconfig", "bootstrap:10-kube-proxy.yaml", "bootstrap:15-network-policy.yaml", "bootstrap:12-csr-approver.yaml"} {
		if !proxied[want] {
			t.Errorf("no %s reaching the API at localhost:6444; those that do: %v", want, slices.Sorted(maps.Keys(proxied)))
		}
	}
}
