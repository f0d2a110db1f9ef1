package kubeconfig

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// credentialAssets are the assets of this package.
func credentialAssets() []graph.WritableAsset {
	return []graph.WritableAsset{
		&Admin{}, &KubeletBootstrap{}, &Localhost{}, &KubeControllerManager{}, &KubeScheduler{},
	}
}

// persist runs the real engine on dir and returns the warnings it logged.
func persist(t *testing.T, dir string) []*logrus.Entry {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	s, err := graph.Open(dir, graph.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(context.Background(), graph.Target{Name: "auth", Assets: credentialAssets()}); err != nil {
		t.Fatal(err)
	}
	var warnings []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			warnings = append(warnings, e)
		}
	}
	return warnings
}

// TestEngineRoundTrip writes the credentials with graph.Store from a minimal
// install-config: every file is 0600, the admin kubeconfig points at the
// defaulted API VIP, and a second run changes nothing.
func TestEngineRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ic := "apiVersion: kiln.dev/v1\nmetadata:\n  name: demo\nbaseDomain: example.test\nplatform:\n  local: {}\n"
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(ic), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := persist(t, dir); len(w) > 0 {
		t.Errorf("first run warned: %s", w[0].Message)
	}
	paths := []string{installdir.AdminKubeconfig, installdir.KubeletBootstrapKubeconfig, installdir.LocalhostKubeconfig, installdir.ControllerManagerKubeconfig, installdir.SchedulerKubeconfig}
	first := map[string][]byte{}
	for _, p := range paths {
		full := filepath.Join(dir, p)
		st, err := os.Stat(full)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %o, want 0600", p, st.Mode().Perm())
		}
		first[p], _ = os.ReadFile(full)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(first[installdir.AdminKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil || net.ParseIP(u.Hostname()) == nil || u.Port() != "6443" || len(rc.CertData) == 0 || len(rc.CAData) == 0 {
		t.Errorf("admin kubeconfig: host %s, want the defaulted API VIP:6443, with a client certificate and CA", rc.Host)
	}

	if w := persist(t, dir); len(w) > 0 {
		t.Errorf("second run warned: %s", w[0].Message)
	}
	for _, p := range paths {
		if now, _ := os.ReadFile(filepath.Join(dir, p)); !bytes.Equal(now, first[p]) {
			t.Errorf("%s changed on the second run", p)
		}
	}
}
