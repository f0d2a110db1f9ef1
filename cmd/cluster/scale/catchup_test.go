package scale

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/platforms"
)

// fakeUpgrader is a platforms.Upgrader that records what a scale asks of
// it, in j too when it is not nil.
type fakeUpgrader struct {
	calls []string
	j     *journal
}

func (f *fakeUpgrader) record(format string, args ...any) {
	call := fmt.Sprintf(format, args...)
	f.calls = append(f.calls, call)
	if f.j != nil {
		f.j.add("%s", call)
	}
}

func (f *fakeUpgrader) PrepareRelease(context.Context, *platforms.Cluster, string) error {
	return fmt.Errorf("not here")
}

func (f *fakeUpgrader) StageRelease(_ context.Context, _ *platforms.Cluster, node, version string) error {
	f.record("stage %s %s", node, version)
	return nil
}

// startAgents plays every node's machine-config agent until the test
// ends: a node whose desired release changed reports it as current, and
// a kubelet asked for runs that version, Ready (with its release's
// kube-proxy image, its pod network comes up). With stuck, no agent acts.
func startAgents(t *testing.T, kube kubernetes.Interface, j *journal) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
			nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, n := range nodes.Items {
				want := n.Annotations[machineconfig.DesiredReleaseAnnotation]
				if want == n.Annotations[machineconfig.CurrentReleaseAnnotation] {
					continue
				}
				r, err := machineconfig.ParseNodeRelease(want)
				if err != nil {
					continue
				}
				if v, ok := r[machineconfig.Kubelet]; ok {
					n.Status.NodeInfo.KubeletVersion = v
					n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
					if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, &n, metav1.UpdateOptions{}); err != nil {
						continue
					}
				}
				nn, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				nn.Annotations[machineconfig.CurrentReleaseAnnotation] = want
				if j != nil {
					j.add("agent %s %s", n.Name, want)
				}
				kube.CoreV1().Nodes().Update(ctx, nn, metav1.UpdateOptions{})
			}
		}
	}()
}

// staticPod is the kind of pod a master's kubelet mirrors.
func staticPod(c release.Component, node, image string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(c) + "-" + node, Namespace: "kube-system",
		Labels: map[string]string{"component": string(c), "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: string(c), Image: image}}}}
}

// manifestOf is a static pod manifest naming image.
func manifestOf(c release.Component, image string) string {
	return "kind: Pod\nmetadata:\n  name: " + string(c) + "\nspec:\n  containers:\n  - image: " + image + "\n"
}

// catchUpCluster is a cluster for catchUp: its masters but the new one run
// the control plane of at (or etcd of etcdAt, when not ""), its nodes the
// kubelets of kubelets (by index, at when short), its add-ons at's; the
// new node booted node's image.
type catchUpCluster struct {
	at, node    release.Release
	etcdAt      string
	kubelets    []string
	noUpgrader  bool
	mixedServer bool // one master runs node's API server
	notReady    bool // the new node's pod network is not up yet
	// agentStuck: the new node's agent never reports what it was asked.
	agentStuck bool
}

// TestCatchUp: a machine added to a cluster upgraded since it was created
// has its agent asked for the kubelet and control plane the cluster runs,
// from the payloads of the releases that hold them (staged first), not
// the install-time ones its node image has; a cluster part-way through an
// upgrade, an image kiln does not pin and a platform that cannot stage a
// release are refused, naming what runs where.
func TestCatchUp(t *testing.T) {
	older, newer := previousMinor(t), release.Default()
	m2 := infra + "-master-2"
	w1 := infra + "-worker-1"
	nv := newer.Kubernetes
	for _, tt := range []struct {
		name      string
		cluster   catchUpCluster
		new       string
		master    bool
		wantCalls []string
		// wantAsked is the new node's desired release after.
		wantAsked string
		wantEtcd  string
		wantErr   string
	}{
		{name: "a master at the install-time release", master: true, new: m2,
			cluster:  catchUpCluster{at: older, node: older},
			wantEtcd: older.Image(release.Etcd)},
		{name: "a master at the install-time release on a platform that cannot stage", master: true, new: m2,
			cluster:  catchUpCluster{at: older, node: older, noUpgrader: true},
			wantEtcd: older.Image(release.Etcd)},
		{name: "a master in an upgraded cluster", master: true, new: m2,
			cluster:   catchUpCluster{at: newer, node: older},
			wantCalls: []string{"stage " + m2 + " " + nv},
			wantAsked: `{"kube-apiserver":"` + nv + `","kube-controller-manager":"` + nv + `","kube-scheduler":"` + nv + `","kubelet":"` + nv + `"}`,
			wantEtcd:  newer.Image(release.Etcd)},
		{name: "a worker in an upgraded cluster", new: w1,
			cluster:   catchUpCluster{at: newer, node: older},
			wantCalls: []string{"stage " + w1 + " " + nv},
			wantAsked: `{"kubelet":"` + nv + `"}`},
		{name: "a master in a cluster whose etcd is another release's", master: true, new: m2,
			cluster:  catchUpCluster{at: newer, node: newer, etcdAt: older.Image(release.Etcd)},
			wantEtcd: older.Image(release.Etcd)},
		{name: "an upgrade under way", master: true, new: m2,
			cluster: catchUpCluster{at: newer, node: older, mixedServer: true, kubelets: []string{newer.Kubernetes, older.Kubernetes}},
			wantErr: "the nodes' kubelets run different versions (" + older.Kubernetes + " on " + infra + "-master-1; " +
				newer.Kubernetes + " on " + infra + "-master-0, " + infra + "-worker-0, " + infra + "-worker-1): an upgrade is under way; finish it with kiln upgrade cluster first\n" +
				"the kube-apiserver pods run different versions (" + older.Image(release.KubeAPIServer) + " on " + infra + "-master-1; " +
				newer.Image(release.KubeAPIServer) + " on " + infra + "-master-0): an upgrade is under way",
			wantEtcd: older.Image(release.Etcd)},
		{name: "an etcd kiln does not pin", master: true, new: m2,
			cluster:  catchUpCluster{at: older, node: older, etcdAt: "kiln.local/etcd:v3.4.0"},
			wantErr:  "the cluster runs kiln.local/etcd:v3.4.0: no release kiln pins runs kiln.local/etcd:v3.4.0",
			wantEtcd: older.Image(release.Etcd)},
		{name: "a node not Ready yet: its kube-proxy needs the image first", new: w1,
			cluster:   catchUpCluster{at: newer, node: older, notReady: true},
			wantCalls: []string{"stage " + w1 + " " + nv},
			wantAsked: `{"kubelet":"` + nv + `"}`},
		{name: "an agent that does not get there", new: w1,
			cluster:   catchUpCluster{at: newer, node: older, agentStuck: true},
			wantCalls: []string{"stage " + w1 + " " + nv},
			wantAsked: `{"kubelet":"` + nv + `"}`,
			wantErr:   "Bringing " + w1 + " to the release the cluster runs: not done after 1s: the machine-config agent of " + w1 + " has not brought it to"},
		{name: "a platform that cannot stage", new: w1,
			cluster: catchUpCluster{at: newer, node: older, noUpgrader: true},
			wantErr: `the cluster runs {"kubelet":"` + nv + `"}, which the node image of ` + w1 + " lacks, and platform"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, up := tt.cluster.runner(t, tt.new)
			err := r.catchUp(context.Background(), tt.new, tt.master)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(up.calls, tt.wantCalls) {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(up.calls, "\n"), strings.Join(tt.wantCalls, "\n"))
			}
			n, err := r.Kube.CoreV1().Nodes().Get(context.Background(), tt.new, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Annotations[machineconfig.DesiredReleaseAnnotation]; got != tt.wantAsked {
				t.Errorf("asked for %s, want %s", got, tt.wantAsked)
			}
			if tt.wantEtcd != "" {
				if want := manifestOf(release.Etcd, tt.wantEtcd); r.PKI.Manifest != want {
					t.Errorf("etcd manifest:\n%s\nwant:\n%s", r.PKI.Manifest, want)
				}
			}
		})
	}
}

// runner returns a scale runner of a cluster of 3 masters and 1 worker
// as c describes, and the new machine's fake platform.
func (c catchUpCluster) runner(t *testing.T, newNode string) (*Runner, *fakeUpgrader) {
	t.Helper()
	ctx := context.Background()
	r, _, _ := newTestRunner(t, 3, 2)
	kube := r.Kube
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, n := range nodes.Items {
		n.Status.NodeInfo.KubeletVersion = c.at.Kubernetes
		if n.Name == newNode {
			n.Status.NodeInfo.KubeletVersion = c.node.Kubernetes
			if c.notReady {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Message: "cni plugin not initialized"}}
			}
		} else if i < len(c.kubelets) {
			n.Status.NodeInfo.KubeletVersion = c.kubelets[i]
			i++
		}
		if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, &n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pods []*corev1.Pod
	for m, master := range []string{infra + "-master-0", infra + "-master-1", infra + "-master-2"} {
		at := c.at
		if master == newNode {
			at = c.node // the replaced master's pods, before it went
		}
		for _, comp := range controlPlane() {
			img := at.Image(comp)
			if comp == release.Etcd && c.etcdAt != "" && master != newNode {
				img = c.etcdAt
			}
			if comp == release.KubeAPIServer && c.mixedServer && m == 1 {
				img = c.node.Image(comp)
			}
			pods = append(pods, staticPod(comp, master, img))
		}
	}
	for _, p := range pods {
		if _, err := kube.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: KubeProxyDaemonSet, Namespace: "kube-system"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: string(release.KubeProxy), Image: c.at.Image(release.KubeProxy)}}
	if _, err := kube.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: CoreDNSDeployment, Namespace: "kube-system"}}
	dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: string(release.CoreDNS), Image: c.at.Image(release.CoreDNS)}}
	if _, err := kube.AppsV1().Deployments("kube-system").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	up := &fakeUpgrader{}
	if !c.agentStuck {
		startAgents(t, kube, nil)
	}
	if !c.noUpgrader {
		r.Upgrader = up
	}
	r.PKI.Manifest = manifestOf(release.Etcd, c.node.Image(release.Etcd))
	r.JoinTimeout = time.Second
	return r, up
}

// previousMinor is the newest pinned release of the minor before the
// default's: its etcd and its images differ from the default's.
func previousMinor(t *testing.T) release.Release {
	t.Helper()
	def := release.Default()
	for _, r := range release.Releases() {
		if r.Minor() == def.Minor()-1 {
			return r
		}
	}
	t.Fatalf("kiln pins no release of the minor before %s", def.Kubernetes)
	return release.Release{}
}
