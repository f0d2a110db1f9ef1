package e2e

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/graph/graphtest"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

// requireAll skips test, with a SKIP line naming it and why it does not
// fit, unless KILN_E2E_ALL=1 (make test-all).
func requireAll(t *testing.T, test, why string) {
	t.Helper()
	if os.Getenv("KILN_E2E_ALL") != "1" {
		t.Skipf("SKIP: %s: %s; make test-all runs it", test, why)
	}
}

// TestClusterRecreate is disaster recovery onto new machines (issue 47): a
// 1+1 cluster holds restoreObjects ConfigMaps and the echo Deployment;
// `kiln backup cluster` archives it; `kiln destroy cluster` removes every
// machine and --dir's state. `kiln restore cluster --from` in that --dir
// re-creates the backup's cluster (killed with SIGKILL while it waits for
// bootstrapping, and run again) and restores etcd on it: the ConfigMaps
// are back, both nodes Ready, the Deployment available, the root CA and
// infra ID are the backup's, and the admin kubeconfig from before the
// disaster still works.
func TestClusterRecreate(t *testing.T) {
	requireMachineHost(t)
	if os.Getenv("KILN_E2E_CLUSTER") == "0" {
		t.Skip("KILN_E2E_CLUSTER=0")
	}
	requireAll(t, "TestClusterRecreate (restore onto re-created machines)", "a cluster of its own, created twice (6 min alone), does not fit make test's hour beside the others")
	kiln := buildStaticKiln(t)
	dir := t.TempDir()
	const machineCIDR = "10.66.106.0/24"
	writeInstallConfig(t, dir, "e2erec", 1, 1, machineCIDR, "")
	_, infraID := createCluster(t, kiln, dir)
	client := adminClient(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	const ns = "e2e-recreate"
	writeConfigMaps(ctx, t, client, ns)
	createEchoDeployment(ctx, t, client)
	waitDeployment(ctx, t, client)

	archive := filepath.Join(t.TempDir(), "backup.tar.gz")
	start := time.Now()
	if out, err := runKiln(t, kiln, 10*time.Minute, "backup", "cluster", "--dir", dir, "--to", archive); err != nil {
		t.Fatalf("backup cluster: %v\n%s", err, lastLines(out, 30))
	}
	t.Logf("backup cluster: %s", time.Since(start).Round(100*time.Millisecond))
	// A --dir of its own for the admin kubeconfig of before the disaster.
	before := t.TempDir()
	copyFile(t, filepath.Join(dir, installdir.AdminKubeconfig), filepath.Join(before, installdir.AdminKubeconfig))
	rootCA := graphtest.StateValue(t, dir, "tls/root-ca")

	if out, err := runKiln(t, kiln, 10*time.Minute, "destroy", "cluster", "--dir", dir); err != nil {
		t.Fatalf("destroy cluster: %v\n%s", err, lastLines(out, 30))
	}
	if _, err := os.Stat(filepath.Join(dir, installdir.State)); !os.IsNotExist(err) {
		t.Fatalf("the state after destroy: %v; want it gone", err)
	}

	start = time.Now()
	killed, _ := signalAt(t, kiln, "Waiting up to 30m0s for bootstrapping to complete", 5*time.Second, syscall.SIGKILL,
		"restore", "cluster", "--dir", dir, "--from", archive)
	assertOutput(t, "restore cluster (killed)", killed, "Re-creating the machines of cluster e2erec (infra ID "+infraID)
	out, err := runKiln(t, kiln, 45*time.Minute, "restore", "cluster", "--dir", dir, "--from", archive)
	if err != nil {
		gather(t, kiln, dir)
		t.Fatalf("restore cluster after the kill: %v\n%s", err, lastLines(out, 60))
	}
	t.Logf("MEASURE restore cluster onto re-created machines (1+1, killed while it created them, run again; to every node Ready): %s\n%s",
		time.Since(start).Round(time.Second), lastLines(out, 20))
	if got := readInfraID(t, dir); got != infraID {
		t.Errorf("infra ID %s after the restore, want the backup's %s", got, infraID)
	}
	if graphtest.StateValue(t, dir, "tls/root-ca") != rootCA {
		t.Errorf("the root CA changed: the re-created cluster must keep the backup's")
	}
	client = adminClient(t, dir)
	mgr := machine.NewManager(machine.Options{})
	assertRestored(ctx, t, client, mgr.Exec, out, ns, []string{infraID + "-master-0"}, 2)
	waitDeployment(ctx, t, client)
	// The admin kubeconfig of before the disaster: its certificate is
	// signed by the same root CA, and the API server's by it too.
	if _, err := adminClient(t, before).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("the admin kubeconfig of before the disaster: %v", err)
	}
}

// copyFile copies src to dst, 0600, making dst's folder.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
