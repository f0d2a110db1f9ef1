package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
)

// fakeUpgrader keeps the nodes' files and records every call.
type fakeUpgrader struct {
	files map[string]string // node:path -> content
	calls []string
}

func (f *fakeUpgrader) PrepareRelease(_ context.Context, v string) error {
	f.calls = append(f.calls, "prepare "+v)
	return nil
}

func (f *fakeUpgrader) LoadRelease(_ context.Context, _, node, v string, cs []release.Component) error {
	f.calls = append(f.calls, fmt.Sprintf("load %s %s %v", node, v, cs))
	return nil
}

func (f *fakeUpgrader) InstallKubelet(_ context.Context, _, node, v string) error {
	f.calls = append(f.calls, "kubelet "+node+" "+v)
	return nil
}

func (f *fakeUpgrader) ReadNodeFile(_ context.Context, _, node, path string) ([]byte, error) {
	d, ok := f.files[node+":"+path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(d), nil
}

func (f *fakeUpgrader) WriteNodeFile(_ context.Context, _, node, path string, data []byte, mode fs.FileMode) error {
	f.calls = append(f.calls, fmt.Sprintf("write %s %s %o", node, path, mode))
	f.files[node+":"+path] = string(data)
	return nil
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

const apiManifest = `apiVersion: v1
kind: Pod
spec:
  containers:
  - name: kube-apiserver
    image: kiln.local/kube-apiserver:v1.35.4
    command: [kube-apiserver, --etcd-servers=https://127.0.0.1:2379]
`

func newClusterNodes(l *live) (*ClusterNodes, *fakeUpgrader, *fakeBackends) {
	up := &fakeUpgrader{files: map[string]string{"master-0:/etc/kubernetes/manifests/kube-apiserver.yaml": apiManifest}}
	lb := &fakeBackends{masters: []string{"master-0", "master-1", "master-2"}}
	var members []*etcdserverpb.Member
	for _, h := range l.etcd {
		members = append(members, h.Member)
	}
	n := &ClusterNodes{Cluster: &platforms.Cluster{InfraID: "demo"}, Upgrader: up, Backends: lb, Kube: l.client(),
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
	api := Change{Component: KubeAPIServer, From: v(older.Kubernetes), To: to}
	if err := n.Apply(ctx, "master-0", api); err != nil {
		t.Fatal(err)
	}
	got := up.files["master-0:/etc/kubernetes/manifests/kube-apiserver.yaml"]
	if want := strings.Replace(apiManifest, older.Kubernetes, release.Default().Kubernetes, 1); got != want {
		t.Errorf("manifest:\n%s\nwant:\n%s", got, want)
	}
	wantCalls := []string{
		"load master-0 " + release.Default().Kubernetes + " [kube-apiserver]",
		"write master-0 /etc/kubernetes/manifests/kube-apiserver.yaml 644",
	}
	if !slices.Equal(up.calls, wantCalls) {
		t.Errorf("calls %q, want %q", up.calls, wantCalls)
	}
	// Applied again: nothing to write.
	up.calls = nil
	if err := n.Apply(ctx, "master-0", api); err != nil || slices.ContainsFunc(up.calls, func(c string) bool { return strings.HasPrefix(c, "write") }) {
		t.Errorf("a second apply wrote again: %q, %v", up.calls, err)
	}
	// Rolled back: the old tag again.
	if err := n.Rollback(ctx, "master-0", api); err != nil || up.files["master-0:/etc/kubernetes/manifests/kube-apiserver.yaml"] != apiManifest {
		t.Errorf("rollback: %v\n%s", err, up.files["master-0:/etc/kubernetes/manifests/kube-apiserver.yaml"])
	}
	// A manifest without the component's image is not guessed at.
	if err := n.Apply(ctx, "master-1", api); err == nil {
		t.Error("applied to a master without the manifest")
	}

	up.calls = nil
	if err := n.Apply(ctx, "worker-0", Change{Component: Kubelet, From: v(older.Kubernetes), To: to}); err != nil {
		t.Fatal(err)
	}
	if len(up.calls) != 2 || !strings.HasPrefix(up.calls[0], "load worker-0 "+release.Default().Kubernetes+" [pause etcd kube-apiserver") ||
		!strings.Contains(up.calls[0], "kube-proxy coredns") || up.calls[1] != "kubelet worker-0 "+release.Default().Kubernetes {
		t.Errorf("kubelet: calls %q", up.calls)
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
	const etcdManifest = "spec:\n  containers:\n  - name: etcd\n    image: kiln.local/etcd:v3.6.16\n"
	file := "master-0:/etc/kubernetes/manifests/etcd.yaml"
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
			n, up, _ := newClusterNodes(newLive([]string{"master-0"}, nil, release.Default().Kubernetes, "3.6.16"))
			up.files[file] = etcdManifest
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
				if want := strings.Replace(etcdManifest, "v3.6.16", "v3.5.35", 1); up.files[file] != want {
					t.Errorf("manifest after the rollback:\n%s", up.files[file])
				}
			case err == nil || !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got %v, want %q", err, tt.wantErr)
			case up.files[file] != etcdManifest:
				t.Errorf("a refused rollback changed the manifest:\n%s", up.files[file])
			}
		})
	}
}
