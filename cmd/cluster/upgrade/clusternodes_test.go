package upgrade

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/cmd/cluster/apivip"
	"github.com/kiln-project/kiln/cmd/cluster/internal/kubetest"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/platforms"
)

// fakeUpgrader records every call.
type fakeUpgrader struct {
	calls []string
}

func (f *fakeUpgrader) PrepareRelease(_ context.Context, _ *platforms.Cluster, v string) error {
	f.calls = append(f.calls, "prepare "+v)
	return nil
}

func (f *fakeUpgrader) StageRelease(_ context.Context, _ *platforms.Cluster, node, v string) error {
	f.calls = append(f.calls, "stage "+node+" "+v)
	return nil
}

// desired is node's kiln.dev/desired-release.
func desired(t *testing.T, n *ClusterNodes, node string) string {
	t.Helper()
	nd, err := n.Kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return nd.Annotations[machineconfig.DesiredReleaseAnnotation]
}

// fakeBackends is the API load balancer's masters.
type fakeBackends struct{ masters []string }

func (f *fakeBackends) ApplyMachines(context.Context, *platforms.Cluster) error { return nil }
func (f *fakeBackends) SetAPIBackends(_ context.Context, _ *platforms.Cluster, m []string) error {
	f.masters = slices.Clone(m)
	return nil
}
func (f *fakeBackends) APIBackends(context.Context, *platforms.Cluster) ([]string, error) {
	return slices.Clone(f.masters), nil
}

// caughtUp is an etcd whose every member leads itself: CaughtUp says yes.
type caughtUp struct{ members []*etcdserverpb.Member }

func (c caughtUp) MemberList(context.Context, ...clientv3.OpOption) (*clientv3.MemberListResponse, error) {
	return &clientv3.MemberListResponse{Members: c.members}, nil
}
func (caughtUp) MemberAddAsLearner(context.Context, []string) (*clientv3.MemberAddResponse, error) {
	return nil, fmt.Errorf("not here")
}
func (caughtUp) MemberPromote(context.Context, uint64) (*clientv3.MemberPromoteResponse, error) {
	return nil, fmt.Errorf("not here")
}
func (caughtUp) MemberRemove(context.Context, uint64) (*clientv3.MemberRemoveResponse, error) {
	return nil, fmt.Errorf("not here")
}
func (c caughtUp) Status(_ context.Context, ep string) (*clientv3.StatusResponse, error) {
	for _, m := range c.members {
		if m.ClientURLs[0] == ep {
			return &clientv3.StatusResponse{Leader: m.ID, Version: "3.5.35"}, nil
		}
	}
	return nil, fmt.Errorf("no member at %s", ep)
}

func newClusterNodes(l *live) (*ClusterNodes, *fakeUpgrader, *fakeBackends) {
	up := &fakeUpgrader{}
	lb := &fakeBackends{masters: []string{"master-0", "master-1", "master-2"}}
	var members []*etcdserverpb.Member
	for _, h := range l.etcd {
		members = append(members, h.Member)
	}
	n := &ClusterNodes{Cluster: &platforms.Cluster{InfraID: "demo", Config: &types.Config{}}, Upgrader: up, Backends: lb, Kube: l.client(),
		Etcd: caughtUp{members}, Drainer: func(context.Context, string) error { return nil }}
	return n, up, lb
}

// older is the release of the minor before the default's; oldest the
// oldest pinned.
var (
	older  = mustLookup("v1.35.4")
	oldest = release.Releases()[len(release.Releases())-1]
)

func mustLookup(v string) release.Release {
	r, err := release.Lookup(v)
	if err != nil {
		panic(err)
	}
	return r
}

func TestClusterNodesApply(t *testing.T) {
	l := newLive([]string{"master-0", "master-1", "master-2"}, []string{"worker-0"}, older.Kubernetes, "3.5.35")
	n, up, _ := newClusterNodes(l)
	ctx := context.Background()
	to := v(release.Default().Kubernetes)
	newer := release.Default().Kubernetes
	api := Change{Component: KubeAPIServer, From: v(older.Kubernetes), To: to}
	if err := n.Apply(ctx, "master-0", api); err != nil {
		t.Fatal(err)
	}
	// The payload is staged, then the node's agent is asked for it.
	if got, want := desired(t, n, "master-0"), `{"kube-apiserver":"`+newer+`"}`; got != want {
		t.Errorf("desired release %s, want %s", got, want)
	}
	if want := []string{"stage master-0 " + newer}; !slices.Equal(up.calls, want) {
		t.Errorf("calls %q, want %q", up.calls, want)
	}
	// Until the agent says it runs it, the gate names what it waits for.
	if err := n.Check(ctx, "master-0", api); err == nil || !strings.Contains(err.Error(), "the machine-config agent of master-0 has not brought it to") {
		t.Errorf("gate before the agent: %v", err)
	}
	// The next change of the node keeps what it asked for before.
	if err := n.Apply(ctx, "master-0", Change{Component: KubeScheduler, From: v(older.Kubernetes), To: to}); err != nil {
		t.Fatal(err)
	}
	if got, want := desired(t, n, "master-0"), `{"kube-apiserver":"`+newer+`","kube-scheduler":"`+newer+`"}`; got != want {
		t.Errorf("desired release %s, want %s", got, want)
	}
	// Rolled back: the old release again, its payload staged.
	up.calls = nil
	if err := n.Rollback(ctx, "master-0", api); err != nil {
		t.Fatal(err)
	}
	if got, want := desired(t, n, "master-0"), `{"kube-apiserver":"`+older.Kubernetes+`","kube-scheduler":"`+newer+`"}`; got != want {
		t.Errorf("desired release after the rollback %s, want %s", got, want)
	}
	if want := []string{"stage master-0 " + older.Kubernetes}; !slices.Equal(up.calls, want) {
		t.Errorf("calls %q, want %q", up.calls, want)
	}

	up.calls = nil
	if err := n.Apply(ctx, "worker-0", Change{Component: Kubelet, From: v(older.Kubernetes), To: to}); err != nil {
		t.Fatal(err)
	}
	if got, want := desired(t, n, "worker-0"), `{"kubelet":"`+newer+`"}`; got != want || !slices.Equal(up.calls, []string{"stage worker-0 " + newer}) {
		t.Errorf("kubelet: desired %s (want %s), calls %q", got, want, up.calls)
	}

	if err := n.Apply(ctx, "", Change{Component: KubeProxy, From: v(older.Kubernetes), To: to}); err != nil {
		t.Fatal(err)
	}
	ds, _ := n.Kube.AppsV1().DaemonSets(Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{})
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != release.Default().Image(release.KubeProxy) {
		t.Errorf("kube-proxy image %s", img)
	}
	if err := n.Apply(ctx, "master-0", Change{Component: KubeAPIServer, To: v("v1.20.0")}); err == nil || !strings.Contains(err.Error(), "no release kiln pins runs kube-apiserver v1.20.0") {
		t.Errorf("an unpinned version: %v", err)
	}
}

func TestClusterNodesCheck(t *testing.T) {
	l := newLive([]string{"master-0"}, []string{"worker-0"}, older.Kubernetes, "3.5.35")
	ctx := context.Background()
	to := v(release.Default().Kubernetes)
	n, _, _ := newClusterNodes(l)
	api := Change{Component: KubeAPIServer, From: v(older.Kubernetes), To: to}
	if err := n.Check(ctx, "master-0", api); err == nil || !strings.Contains(err.Error(), "not kiln.local/kube-apiserver:"+release.Default().Kubernetes+" yet") {
		t.Errorf("old pod: %v", err)
	}
	if err := n.Check(ctx, "master-0", Change{Component: KubeAPIServer, To: v(older.Kubernetes)}); err != nil {
		t.Errorf("the running version: %v", err)
	}
	edit(l, "kube-apiserver-master-0", func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = release.Default().Image(release.KubeAPIServer)
		p.Status.Conditions[0].Status = corev1.ConditionFalse
	})
	n, _, _ = newClusterNodes(l)
	if err := n.Check(ctx, "master-0", api); err == nil || !strings.Contains(err.Error(), "not Ready") {
		t.Errorf("new pod not Ready: %v", err)
	}
	if err := n.Check(ctx, "master-0", Change{Component: Etcd, To: v("3.5.35")}); err != nil {
		t.Errorf("etcd caught up: %v", err)
	}
	kubelet := Change{Component: Kubelet, From: v(older.Kubernetes), To: to}
	if err := n.Check(ctx, "worker-0", kubelet); err == nil || !strings.Contains(err.Error(), "reports kubelet "+older.Kubernetes) {
		t.Errorf("old kubelet: %v", err)
	}
	edit(l, "worker-0", func(nd *corev1.Node) { nd.Status.NodeInfo.KubeletVersion = release.Default().Kubernetes })
	edit(l, "kube-proxy", func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = release.Default().Image(release.KubeProxy)
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}
	})
	n, _, _ = newClusterNodes(l)
	if err := n.Check(ctx, "worker-0", kubelet); err != nil {
		t.Errorf("new kubelet, Ready: %v", err)
	}
	if err := n.Check(ctx, "", Change{Component: KubeProxy, To: to}); err == nil || !strings.Contains(err.Error(), "1 of 2 pods updated") {
		t.Errorf("a rollout under way: %v", err)
	}
	// A master's new kubelet passes only once its control plane is Ready
	// again (a new kubelet may restart the static pods).
	edit(l, "master-0", func(nd *corev1.Node) { nd.Status.NodeInfo.KubeletVersion = release.Default().Kubernetes })
	n, _, _ = newClusterNodes(l)
	if err := n.Check(ctx, "master-0", kubelet); err == nil || !strings.Contains(err.Error(), "kube-system/kube-apiserver-master-0: not Ready") {
		t.Errorf("a master's kubelet with its API server not Ready: %v", err)
	}
}

func TestClusterNodesAPIBackend(t *testing.T) {
	n, _, lb := newClusterNodes(newLive([]string{"master-0", "master-1", "master-2"}, nil, older.Kubernetes, "3.5.35"))
	ctx := context.Background()
	if err := n.APIBackend(ctx, "master-1", false); err != nil || !slices.Equal(lb.masters, []string{"master-0", "master-2"}) {
		t.Errorf("out: %v, %v", lb.masters, err)
	}
	if err := n.APIBackend(ctx, "master-1", true); err != nil || !slices.Equal(lb.masters, []string{"master-0", "master-1", "master-2"}) {
		t.Errorf("back: %v, %v", lb.masters, err)
	}
	lb.masters = []string{"master-0"}
	if err := n.APIBackend(ctx, "master-0", false); err != nil || !slices.Equal(lb.masters, []string{"master-0"}) {
		t.Errorf("a single master stays: %v, %v", lb.masters, err)
	}

	// With an API VIP that kiln keeps, the master leaves its announcers
	// too, once another announces it, and rejoins them.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"items":[{"status":{"node":"master-0"}}]}`)
	}))
	defer srv.Close()
	kube := n.Kube.(*fake.Clientset)
	n.Kube = kubetest.Serve(kube, srv.URL)
	n.Cluster.Config = &types.Config{Platform: types.Platform{SSH: &ssh.Platform{APIVIP: "10.0.0.5"}}}
	lb.masters = []string{"master-0", "master-1", "master-2"}
	labelled := func() bool {
		nd, err := kube.CoreV1().Nodes().Get(ctx, "master-1", metav1.GetOptions{})
		_, ok := nd.Labels[apivip.ExcludeLabel]
		return err == nil && ok
	}
	if err := n.APIBackend(ctx, "master-1", false); err != nil || !labelled() {
		t.Errorf("out with a VIP: labelled %v, %v", labelled(), err)
	}
	if err := n.APIBackend(ctx, "master-1", true); err != nil || labelled() || !slices.Equal(lb.masters, []string{"master-0", "master-1", "master-2"}) {
		t.Errorf("back with a VIP: labelled %v, backends %v, %v", labelled(), lb.masters, err)
	}
}

// TestClusterNodesCheckWaitsForLeaders: a master's new kubelet may have
// restarted the leading controller manager; its gate passes only once
// each leader lease is renewed again (the next step drains a node).
func TestClusterNodesCheckWaitsForLeaders(t *testing.T) {
	l := newLive([]string{"master-0"}, nil, release.Default().Kubernetes, "3.5.35")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	lease := func(name string, renewed time.Duration) *coordinationv1.Lease {
		holder := "master-0_1234"
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	kubelet := Change{Component: Kubelet, From: v(older.Kubernetes), To: v(release.Default().Kubernetes)}
	check := func(objects ...runtime.Object) error {
		live := *l
		live.objects = append(slices.Clone(l.objects), objects...)
		n, _, _ := newClusterNodes(&live)
		n.Now = func() time.Time { return now }
		return n.Check(context.Background(), "master-0", kubelet)
	}
	if err := check(); err != nil {
		t.Errorf("no leases (no leader election): %v", err)
	}
	if err := check(lease("kube-controller-manager", 2*time.Second), lease("kube-scheduler", time.Second)); err != nil {
		t.Errorf("both leaders renewed: %v", err)
	}
	err := check(lease("kube-controller-manager", 25*time.Second), lease("kube-scheduler", time.Second))
	if err == nil || !strings.Contains(err.Error(), "no kube-controller-manager leads: lease kube-system/kube-controller-manager was last renewed 25s ago by master-0_1234") {
		t.Errorf("a dead leader's lease: %v", err)
	}
}

// TestClusterNodesEtcdRollback: an etcd member goes back a minor only
// while etcd's cluster version is still the old minor.
func TestClusterNodesEtcdRollback(t *testing.T) {
	etcd := Change{Component: Etcd, From: v("3.5.35"), To: v("3.6.16")}
	for _, tt := range []struct {
		name, cluster string
		askErr        error
		wantErr       string // "" when rolled back
		irreversible  bool
	}{
		{name: "mixed cluster", cluster: "3.5.0"},
		{name: "every member ran 3.6", cluster: "3.6.0", irreversible: true,
			wantErr: "etcd's cluster version is 3.6.0: every member has run etcd 3.6, and an etcd 3.5.35 member cannot rejoin the cluster"},
		{name: "no member answers", askErr: fmt.Errorf("connection refused"),
			wantErr: "etcd's cluster version, which decides whether etcd 3.5.35 can come back: connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, _, _ := newClusterNodes(newLive([]string{"master-0"}, nil, release.Default().Kubernetes, "3.6.16"))
			n.EtcdClusterVersion = func(context.Context) (string, error) { return tt.cluster, tt.askErr }
			err := n.Rollback(context.Background(), "master-0", etcd)
			var irr *IrreversibleError
			if errors.As(err, &irr) != tt.irreversible {
				t.Errorf("irreversible: %v, want %v (%v)", !tt.irreversible, tt.irreversible, err)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr == "":
				if got, want := desired(t, n, "master-0"), `{"etcd":"`+older.Kubernetes+`"}`; got != want {
					t.Errorf("desired release after the rollback %s, want %s", got, want)
				}
			case err == nil || !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got %v, want %q", err, tt.wantErr)
			case desired(t, n, "master-0") != "":
				t.Errorf("a refused rollback asked for %s", desired(t, n, "master-0"))
			}
		})
	}
}
