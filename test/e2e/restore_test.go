package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/platforms/local/machine"
)

// restoreObjects is how many ConfigMaps the restore must bring back.
const restoreObjects = 200

// assertRestore is issue 47's recovery: restoreObjects ConfigMaps are
// written and backed up by the cluster itself (takeScheduledBackup),
// encrypted to key (the archive checked without it and with it), then
// deleted; two of the three masters lose
// etcd's data and their member is killed, so etcd has no quorum and the
// API fails. `kiln restore cluster` is killed (SIGKILL) while it works on
// the masters and run again: the ConfigMaps are back, etcd has the three
// masters as voters, every node is Ready, and the echo Deployment
// (assertRestart's, in the backup) is available.
func assertRestore(t *testing.T, kiln, dir, infraID string, client kubernetes.Interface, nodes int, key backupKey) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	mgr := machine.NewManager(machine.Options{})
	masters := []string{infraID + "-master-0", infraID + "-master-1", infraID + "-master-2"}
	const ns = "e2e-restore"
	writeConfigMaps(ctx, t, client, ns)
	// The backup is the cluster's own (install-config's backup, a Job of
	// its CronJob), encrypted to a key of kiln backup keygen's kept away
	// from --dir and the cluster: it is read with that key only.
	archive := takeScheduledBackup(ctx, t, client, infraID, 3)
	if out, err := runKiln(t, kiln, time.Minute, "backup", "check", archive); err == nil || !strings.Contains(out, "--identity") {
		t.Errorf("backup check of the encrypted archive without its key: %v\n%s", err, out)
	}
	if out, err := runKiln(t, kiln, time.Minute, "backup", "check", archive, "--identity", key.identity); err != nil || !strings.Contains(out, "all as the manifest says") {
		t.Errorf("backup check --identity: %v\n%s", err, out)
	}
	identity := key.identity
	deleteConfigMaps(ctx, t, client, ns)
	loseEtcdQuorum(ctx, t, client, mgr.Exec, masters[1:])

	start := time.Now()
	killed, _ := signalAt(t, kiln, "etcd and the API server stopped", time.Second, syscall.SIGKILL, "restore", "cluster", "--dir", dir, "--from", archive, "--identity", identity)
	t.Logf("restore cluster killed (SIGKILL) 1 s after the other masters stopped, as the first restores:\n%s", lastLines(killed, 10))
	out, err := runKiln(t, kiln, 30*time.Minute, "restore", "cluster", "--dir", dir, "--from", archive, "--identity", identity)
	if err != nil {
		t.Fatalf("restore cluster after the kill: %v\n%s", err, lastLines(out, 60))
	}
	t.Logf("MEASURE restore cluster (kill and re-run, to every node Ready): %s\n%s", time.Since(start).Round(time.Second), lastLines(out, 20))
	assertRestored(ctx, t, client, mgr.Exec, out, ns, masters, nodes)
	assertEtcdVoters(ctx, t, mgr.Exec, masters)
	waitDeployment(ctx, t, client)
}

// machineExec runs argv on the machine node: a machine of the local
// platform, or a test host of the ssh platform's (also a machine).
type machineExec func(ctx context.Context, node string, argv ...string) ([]byte, error)

// writeConfigMaps creates the namespace ns with restoreObjects
// ConfigMaps, which a backup then holds.
func writeConfigMaps(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	for i := range restoreObjects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteConfigMaps deletes writeConfigMaps' ConfigMaps after the backup.
func deleteConfigMaps(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	if err := client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := countConfigMaps(ctx, t, client, ns); n != 0 {
		t.Fatalf("%d ConfigMaps left in %s after their deletion", n, ns)
	}
}

// loseEtcdQuorum wipes etcd's data on the masters lost (a majority) and
// kills their etcd, then waits until the API's /readyz fails. A member
// that the kubelet restarts with an empty data directory fast enough
// rejoins the intact leader before it steps down (etcd sends it a
// snapshot), and the cluster heals without a restore (TestSSHCluster saw
// /readyz ok for 3 minutes, with the Slower control plane's longer
// election timeout): so their etcd is wiped and killed again at every
// poll until the API fails, which the kubelet's restart back-off turns
// into a lasting outage, as of masters whose disks are gone.
func loseEtcdQuorum(ctx context.Context, t *testing.T, client kubernetes.Interface, exec machineExec, lost []string) {
	t.Helper()
	wipe := func(report func(string, ...any)) {
		for _, m := range lost {
			if out, err := exec(ctx, m, "sh", "-c", "rm -rf /var/lib/etcd/member && { pkill -9 -x etcd || true; }"); err != nil {
				report("%s: wipe etcd's data: %v\n%s", m, err, out)
			}
		}
	}
	wipe(t.Fatalf)
	at := time.Now()
	for {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").Timeout(10 * time.Second).DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			t.Logf("the API fails %s after %s lost etcd's data: %v", time.Since(at).Round(time.Second), strings.Join(lost, ", "), briefError(err))
			return
		}
		if time.Since(at) > 3*time.Minute {
			t.Fatalf("/readyz still ok 3 minutes after %s lost etcd's data", strings.Join(lost, ", "))
		}
		time.Sleep(2 * time.Second)
		wipe(t.Logf)
	}
}

// assertRestored checks a cluster after kiln restore cluster (its output
// out): writeConfigMaps' ConfigMaps of ns are back, nodes nodes are all
// Ready, the first of masters (the seed, whose data was not wiped) kept
// its old etcd data inside /var/lib/etcd, and no master has the snapshot
// left. The caller checks etcd's voters.
func assertRestored(ctx context.Context, t *testing.T, client kubernetes.Interface, exec machineExec, out, ns string, masters []string, nodes int) {
	t.Helper()
	for _, m := range masters[1:] {
		assertOutput(t, "restore cluster", out, "finish joining master "+m)
	}
	assertOutput(t, "restore cluster", out, "Restore complete")
	if n := countConfigMaps(ctx, t, client, ns); n != restoreObjects {
		t.Errorf("%d ConfigMaps in %s after the restore, want %d", n, ns, restoreObjects)
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready after the restore", n.Name)
		}
	}
	if len(list.Items) != nodes {
		t.Errorf("%d nodes after the restore, want %d", len(list.Items), nodes)
	}
	// The others lost their member directory (loseEtcdQuorum): nothing of
	// theirs to keep aside.
	out0, err := exec(ctx, masters[0], "sh", "-c", "ls -d /var/lib/etcd/member.before-restore-*")
	if err != nil || !strings.Contains(string(out0), "/var/lib/etcd/member.before-restore-") {
		t.Errorf("%s after the restore: %q, %v; want its old data kept aside", masters[0], out0, err)
	}
	for _, m := range masters {
		out, err := exec(ctx, m, "sh", "-c", "ls /var/lib/kiln/etcd-restore.db 2>&1 || true")
		if err != nil || !strings.Contains(string(out), "No such file") {
			t.Errorf("%s after the restore: %q, %v; want no snapshot left", m, out, err)
		}
	}
}

// countConfigMaps counts the ConfigMaps of ns, retrying while the API
// answers errors.
func countConfigMaps(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) int {
	t.Helper()
	var last error
	for range 30 {
		l, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			n := 0
			for _, cm := range l.Items {
				if strings.HasPrefix(cm.Name, "cm-") {
					n++
				}
			}
			return n
		}
		last = err
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("list the ConfigMaps of %s: %v", ns, last)
	return 0
}

// briefError is err's first line.
func briefError(err error) string {
	if err == nil {
		return "not ok"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
