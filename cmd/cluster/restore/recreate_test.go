package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/assets/targets"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/backup"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/graphtest"
	"github.com/kiln-project/kiln/graph/installdir"
)

const testConfig = `apiVersion: kiln.dev/v1
metadata:
  name: dev
baseDomain: example.com
platform:
  none: {}
`

// backedUpDir creates the Ignition configs of a cluster in a new --dir
// and writes a backup archive of it (with a stand-in snapshot); withState
// false leaves the state out, as a backup the cluster takes by itself
// does; kubernetes is the release the backup says the cluster ran. It
// returns the --dir and the archive's path.
func backedUpDir(t *testing.T, withState bool, kubernetes string) (dir, archive string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, installdir.InstallConfig), []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(context.Background(), targets.IgnitionConfigs()); err != nil {
		t.Fatal(err)
	}
	db := []byte(strings.Repeat("bolt page ", 500))
	sum := sha256.Sum256(db)
	snapshot := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(snapshot, append(db, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	m := backup.Manifest{Version: backup.FormatVersion, Cluster: "dev", InfraID: "dev-abcde", Platform: "none", Kubernetes: kubernetes, TakenAt: time.Now().UTC()}
	if m.Snapshot, err = backup.Describe(backup.SnapshotName, snapshot); err != nil {
		t.Fatal(err)
	}
	files, err := backup.DirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == installdir.State && !withState {
			continue
		}
		d, err := backup.Describe(backup.DirPrefix+f, filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, d)
	}
	snap, err := os.Open(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var b bytes.Buffer
	if err := backup.Write(&b, m, snap, dir); err != nil {
		t.Fatal(err)
	}
	archive = filepath.Join(t.TempDir(), "backup.tar.gz")
	if err := os.WriteFile(archive, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, archive
}

// TestSeedKeepsTheIdentityAndIssuesTheRest re-creates a backup's --dir as
// kiln restore cluster does in a --dir without a cluster: the destroyed
// cluster's install-config.yaml is back in --dir (destroy puts it back).
func TestSeedKeepsTheIdentityAndIssuesTheRest(t *testing.T) {
	old, archive := backedUpDir(t, true, release.Default().Kubernetes)
	dir := t.TempDir()
	ic, err := os.ReadFile(filepath.Join(old, installdir.Consumed, installdir.InstallConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, installdir.InstallConfig), ic, 0o600); err != nil {
		t.Fatal(err)
	}
	recreate, seed, err := Recreates(dir, Journal{}, false)
	if err != nil || !recreate || !seed {
		t.Fatalf("Recreates in an empty --dir = %v, %v, %v; want a re-creation from the backup's state", recreate, seed, err)
	}
	at := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	j, err := Seed(dir, Options{From: archive}, Journal{}, false, at, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !j.Recreate || j.Run != "20261206T010000Z" || j.Seed != "" || j.Configs {
		t.Errorf("journal %+v", j)
	}
	if got, found, err := Pending(dir); err != nil || !found || got != j {
		t.Errorf("Pending = %+v, %v, %v; want %+v", got, found, err, j)
	}
	if info, err := os.Stat(filepath.Join(dir, installdir.State)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the seeded state: %v, %v; want 0600", info, err)
	}
	s, err := graph.Open(dir, graph.WithRenew(Reissued()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Persist(context.Background(), targets.IgnitionConfigs()); err != nil {
		t.Fatal(err)
	}
	// What the backup's etcd was made with is kept.
	kept := []string{clusterid.ID, installconfig.ID, (&kilntls.RootCA{}).ID(), (&kilntls.EtcdCA{}).ID(), (&kilntls.FrontProxyCA{}).ID(),
		(&kilntls.KubeletServingCA{}).ID(), (&kilntls.ServiceAccountKeyPair{}).ID()}
	for _, id := range kept {
		if graphtest.StateValue(t, dir, id) != graphtest.StateValue(t, old, id) {
			t.Errorf("%s was not kept", id)
		}
	}
	// Every leaf certificate and the bootstrap credentials are new.
	for _, id := range append(kilntls.RenewableIDs(), (&kilntls.EtcdServer{}).ID(), "bootstrap-token", "machine-config-tokens") {
		if graphtest.StateValue(t, dir, id) == graphtest.StateValue(t, old, id) {
			t.Errorf("%s was kept; want it issued again", id)
		}
	}
	for _, f := range []string{installdir.Metadata, installdir.Ignition("bootstrap"), installdir.AdminKubeconfig} {
		a, errA := os.ReadFile(filepath.Join(old, f))
		b, errB := os.ReadFile(filepath.Join(dir, f))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if same := bytes.Equal(a, b); same != (f == installdir.Metadata) {
			t.Errorf("%s the same as the backup's: %v", f, same)
		}
	}
	// Cut short before the journal said the configs were written (they
	// were, metadata.json with them): seeded again, the same restore.
	again, err := Seed(dir, Options{From: archive}, j, true, at.Add(time.Hour), io.Discard)
	if err != nil || again != j {
		t.Errorf("Seed again = %+v, %v; want %+v", again, err, j)
	}
	// A run cut short once they are goes on without seeding again.
	j.Configs = true
	if err := j.Save(dir); err != nil {
		t.Fatal(err)
	}
	if recreate, seed, err := Recreates(dir, j, true); err != nil || !recreate || seed {
		t.Errorf("Recreates after the configs = %v, %v, %v; want a re-creation that does not seed", recreate, seed, err)
	}
	// A --dir with a cluster restores it in place.
	if recreate, _, err := Recreates(old, Journal{}, false); err != nil || recreate {
		t.Errorf("Recreates in a --dir with a cluster = %v, %v", recreate, err)
	}
}

func TestSeedRefusesAndLeavesDirAsItWas(t *testing.T) {
	_, archive := backedUpDir(t, true, release.Default().Kubernetes)
	_, scheduled := backedUpDir(t, false, release.Default().Kubernetes)
	_, upgraded := backedUpDir(t, true, "v1.99.0")
	for _, tc := range []struct {
		name  string
		from  string
		files map[string]string
		want  string
	}{
		{"another install-config", archive, map[string]string{installdir.InstallConfig: testConfig + "# edited\n"}, "install-config.yaml is not the install-config of the backup's cluster"},
		{"a cluster's metadata.json", archive, map[string]string{installdir.Metadata: `{"infraID":"dev-zzzzz"}`}, "destroy cluster --infra-id"},
		{"a backup without the state", scheduled, nil, "holds no state of a --dir"},
		{"an upgraded cluster", upgraded, nil, "ran Kubernetes v1.99.0, and its install-config creates " + release.Default().Kubernetes},
		{"no backup", filepath.Join(t.TempDir(), "missing.tar.gz"), nil, "missing.tar.gz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Seed(dir, Options{From: tc.from}, Journal{}, false, time.Now(), io.Discard)
			if exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Seed: %v; want an input error with %q", err, tc.want)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if len(names) != len(tc.files) {
				t.Errorf("--dir holds %v after the refusal; want only what was there", names)
			}
		})
	}
	// A re-creation of another backup under way is refused, naming it.
	dir := t.TempDir()
	prev := Journal{Run: "20261206T010000Z", Snapshot: "ffff", Recreate: true}
	if err := prev.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Seed(dir, Options{From: archive}, prev, true, time.Now(), io.Discard); exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), prev.Run) {
		t.Errorf("Seed with another restore under way: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, installdir.State)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state after the refusal: %v; want none", err)
	}
}

func TestPruneNodesDeletesOnlyThoseWithoutAMachine(t *testing.T) {
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	client := fake.NewClientset(node("c-master-0"), node("c-worker-0"), node("c-worker-1"))
	gone, err := pruneNodes(context.Background(), client, []string{"c-master-0", "c-worker-0"})
	if err != nil || !slices.Equal(gone, []string{"c-worker-1"}) {
		t.Fatalf("pruneNodes = %v, %v; want [c-worker-1]", gone, err)
	}
	left, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(left.Items) != 2 {
		t.Errorf("Nodes left: %v, %v", left, err)
	}
}

func TestPodNetworkPodsAndStaleAddresses(t *testing.T) {
	cidr := netip.MustParsePrefix("10.128.0.0/23")
	pod := func(name, node, ip string, host bool) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Spec: corev1.PodSpec{NodeName: node, HostNetwork: host}, Status: corev1.PodStatus{PodIP: ip}}
	}
	pods := []corev1.Pod{
		pod("coredns-a", "m0", "10.128.2.6", false), // the other range
		pod("coredns-b", "m0", "10.128.1.4", false), // its status may still be the backup's
		pod("kube-proxy", "m0", "10.66.106.11", true),
		pod("pending", "m0", "", false),
		pod("metrics", "w0", "10.128.2.5", false), // another node's
	}
	var names []string
	for _, p := range podNetworkPods(pods, "m0") {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"coredns-a", "coredns-b", "pending"}) {
		t.Errorf("podNetworkPods = %v, want every pod of m0 off the host's network", names)
	}
	ipJSON := []byte(`[{"ifindex":5,"ifname":"cni0","addr_info":[{"family":"inet","local":"10.128.2.1","prefixlen":23},{"family":"inet","local":"10.128.0.1","prefixlen":23}]}]`)
	if got := staleAddresses(ipJSON, cidr); !slices.Equal(got, []string{"10.128.2.1/23"}) {
		t.Errorf("staleAddresses = %v, want [10.128.2.1/23]", got)
	}
}
