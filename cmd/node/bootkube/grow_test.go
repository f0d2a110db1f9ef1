package bootkube

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/manifests"
	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/assets/tls/tlstest"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// fakeCluster is an in-memory etcd membership; its members do not answer
// their status (growing etcd never asks).
type fakeCluster struct {
	clientv3.Cluster
	clientv3.Maintenance
	members  []*etcdserverpb.Member
	nextID   uint64
	promoted []uint64
	refuse   bool // MemberPromote fails: learner not caught up
}

func (f *fakeCluster) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return &clientv3.MemberListResponse{Members: f.members}, nil
}

func (f *fakeCluster) MemberAddAsLearner(_ context.Context, urls []string) (*clientv3.MemberAddResponse, error) {
	f.nextID++
	m := &etcdserverpb.Member{ID: f.nextID, PeerURLs: urls, IsLearner: true}
	f.members = append(f.members, m)
	return &clientv3.MemberAddResponse{Member: m, Members: f.members}, nil
}

func (f *fakeCluster) MemberPromote(_ context.Context, id uint64) (*clientv3.MemberPromoteResponse, error) {
	if f.refuse {
		return nil, context.DeadlineExceeded
	}
	for _, m := range f.members {
		if m.ID == id {
			m.IsLearner = false
		}
	}
	f.promoted = append(f.promoted, id)
	return &clientv3.MemberPromoteResponse{}, nil
}

func masterNode(name, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodelayout.RoleLabel: "master"}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func testCA(t *testing.T) *kilntls.CertKey { return tlstest.CA(t) }

func TestStepGrowsOneMemberAtATime(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	client := fake.NewClientset(masterNode("m-1", "10.66.0.12"), masterNode("m-0", "10.66.0.11"))
	cluster := &fakeCluster{nextID: 100, members: []*etcdserverpb.Member{{ID: 1, Name: "boot", PeerURLs: []string{"https://10.66.0.10:2380"}}}}
	g := &grower{
		cfg:      Config{Masters: 2, NodeName: "boot", InstallerImage: "kiln.local/pause:3.10", Log: log},
		client:   client,
		etcd:     cluster,
		ca:       testCA(t),
		manifest: "- --initial-cluster=" + manifests.EtcdInitialClusterMarker + "\n",
	}
	ctx := context.Background()

	// Step 1 adds m-0 (sorted first) as a learner and starts its installer.
	if _, err := g.step(ctx); !isNotYet(err) || !strings.Contains(err.Error(), "added m-0") {
		t.Fatalf("step 1: %v", err)
	}
	secret, err := client.CoreV1().Secrets(handover.SystemNamespace).Get(ctx, "etcd-m-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(secret.Data["etcd.yaml"]); got != "- --initial-cluster=boot=https://10.66.0.10:2380,m-0=https://10.66.0.11:2380\n" {
		t.Errorf("etcd manifest = %q", got)
	}
	for _, k := range []string{"ca.crt", "server.crt", "server.key", "peer.crt", "peer.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("installer secret lacks %s", k)
		}
	}
	pod, err := client.CoreV1().Pods(handover.SystemNamespace).Get(ctx, "etcd-installer-m-0", metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != "m-0" || !pod.Spec.HostNetwork {
		t.Fatalf("installer pod = %+v, %v", pod, err)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "m-0", metav1.GetOptions{})
	if _, ok := node.Labels[handover.ControlPlaneLabel]; !ok {
		t.Error("master not labelled with the control-plane role")
	}

	// Step 2: the learner has not started (no name): nothing else is added.
	if _, err := g.step(ctx); !isNotYet(err) || !strings.Contains(err.Error(), "has not started") {
		t.Fatalf("step 2: %v", err)
	}
	// Step 3: started but not caught up: promotion refused, still waiting.
	cluster.members[1].Name = "m-0"
	cluster.refuse = true
	if _, err := g.step(ctx); !isNotYet(err) || !strings.Contains(err.Error(), "not ready to vote") {
		t.Fatalf("step 3: %v", err)
	}
	// Step 4: promoted; its secret (keys) is removed.
	cluster.refuse = false
	if _, err := g.step(ctx); !isNotYet(err) || len(cluster.promoted) != 1 {
		t.Fatalf("step 4: %v, promoted %v", err, cluster.promoted)
	}
	if _, err := client.CoreV1().Secrets(handover.SystemNamespace).Get(ctx, "etcd-m-0", metav1.GetOptions{}); err == nil {
		t.Error("installer secret with private keys left behind")
	}
	// Step 5 adds m-1; after it votes, step returns both masters.
	if _, err := g.step(ctx); !isNotYet(err) || !strings.Contains(err.Error(), "added m-1") {
		t.Fatalf("step 5: %v", err)
	}
	cluster.members[2].Name = "m-1"
	g.step(ctx)
	masters, err := g.step(ctx)
	if err != nil || len(masters) != 2 || masters[0].Name != "m-0" || masters[1].IP != "10.66.0.12" {
		t.Fatalf("final step = %v, %v", masters, err)
	}
}

func TestStepWaitsForAllMasters(t *testing.T) {
	g := &grower{cfg: Config{Masters: 3, Log: logrus.New()}, client: fake.NewClientset(masterNode("m-0", "10.66.0.11")), etcd: &fakeCluster{}}
	if _, err := g.step(context.Background()); !isNotYet(err) || err.Error() != "1 of 3 masters registered" {
		t.Fatalf("err = %v", err)
	}
}

func TestApplyArgv(t *testing.T) {
	got := strings.Join(ApplyArgv("/k", "/m"), " ")
	if got != "--kubeconfig /k apply --server-side --force-conflicts --field-manager kiln-bootkube -f /m" {
		t.Fatal(got)
	}
}
