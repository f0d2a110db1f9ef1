package scale

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// fakeUpgrader is a platforms.Upgrader over one machine's files; it
// records what a scale asks of it, in j too when it is not nil.
type fakeUpgrader struct {
	calls []string
	files map[string]string // path -> content
	j     *journal
	// kube, when not nil, gets the Node of a machine whose kubelet is
	// installed report its version, as the kubelet would.
	kube kubernetes.Interface
}

func (f *fakeUpgrader) record(format string, args ...any) {
	call := fmt.Sprintf(format, args...)
	f.calls = append(f.calls, call)
	if f.j != nil {
		f.j.add("%s", call)
	}
}

func (f *fakeUpgrader) PrepareRelease(context.Context, string) error { return fmt.Errorf("not here") }
func (f *fakeUpgrader) LoadRelease(_ context.Context, infraID, node, version string, cs []release.Component) error {
	f.record("load %s %s %s %v", infraID, node, version, cs)
	return nil
}
func (f *fakeUpgrader) InstallKubelet(_ context.Context, infraID, node, version string) error {
	f.record("kubelet %s %s %s", infraID, node, version)
	if f.kube == nil {
		return nil
	}
	n, err := f.kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Status.NodeInfo.KubeletVersion = version
	// With its release's kube-proxy image, the node's pod network comes up.
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	_, err = f.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	return err
}
func (f *fakeUpgrader) ReadNodeFile(_ context.Context, _, _, path string) ([]byte, error) {
	data, ok := f.files[path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return []byte(data), nil
}
func (f *fakeUpgrader) WriteNodeFile(_ context.Context, _, node, path string, data []byte, mode fs.FileMode) error {
	f.record("write %s %s %o", node, path, mode)
	f.files[path] = string(data)
	return nil
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
// new node's machine holds the files of node's image.
type catchUpCluster struct {
	at, node    release.Release
	etcdAt      string
	kubelets    []string
	activated   bool // the installer moved the staged manifests already
	noUpgrader  bool
	mixedServer bool // one master runs node's API server
	notReady    bool // the new node's pod network is not up yet
	// kubeletStuck: the kubelet installed never reports its version
	// (its Node keeps the old kubelet's status).
	kubeletStuck bool
}

// TestCatchUp: a machine added to a cluster upgraded since it was created
// gets the kubelet, the images and the control-plane manifests the
// cluster runs, from the releases that hold them, not the install-time
// ones its node image has; a cluster part-way through an upgrade, an image
// kiln does not pin and a platform that cannot load are refused, naming
// what runs where.
func TestCatchUp(t *testing.T) {
	older, newer := previousMinor(t), release.Default()
	m2 := infra + "-master-2"
	w1 := infra + "-worker-1"
	all := func(r release.Release) string {
		var cs []string
		for _, s := range r.Images() {
			cs = append(cs, string(s.Component))
		}
		return "[" + strings.Join(cs, " ") + "]"
	}
	staged := func(c release.Component) string { return nodelayout.StagedPodDir + "/" + string(c) + ".yaml" }
	active := func(c release.Component) string { return nodelayout.StaticPodDir + "/" + string(c) + ".yaml" }
	for _, tt := range []struct {
		name      string
		cluster   catchUpCluster
		new       string
		master    bool
		wantCalls []string
		// wantFiles are the new master's manifests after, by the
		// release their images are of (etcd's is r.PKI.Manifest).
		wantFiles map[string]string
		wantEtcd  string
		wantErr   string
	}{
		{name: "a master at the install-time release", master: true, new: m2,
			cluster:  catchUpCluster{at: older, node: older},
			wantEtcd: older.Image(release.Etcd)},
		{name: "a master at the install-time release on a platform that cannot load", master: true, new: m2,
			cluster:  catchUpCluster{at: older, node: older, noUpgrader: true},
			wantEtcd: older.Image(release.Etcd)},
		{name: "a master in an upgraded cluster", master: true, new: m2,
			cluster: catchUpCluster{at: newer, node: older},
			wantCalls: []string{
				"load " + infra + " " + m2 + " " + newer.Kubernetes + " " + all(newer),
				"kubelet " + infra + " " + m2 + " " + newer.Kubernetes,
				"write " + m2 + " " + staged(release.KubeAPIServer) + " 644",
				"write " + m2 + " " + staged(release.KubeControllerManager) + " 644",
				"write " + m2 + " " + staged(release.KubeScheduler) + " 644",
			},
			wantFiles: map[string]string{
				staged(release.KubeAPIServer):         newer.Image(release.KubeAPIServer),
				staged(release.KubeControllerManager): newer.Image(release.KubeControllerManager),
				staged(release.KubeScheduler):         newer.Image(release.KubeScheduler),
			},
			wantEtcd: newer.Image(release.Etcd)},
		{name: "a re-run after the installer activated the control plane", master: true, new: m2,
			cluster: catchUpCluster{at: newer, node: older, activated: true, kubelets: []string{newer.Kubernetes, newer.Kubernetes, newer.Kubernetes, newer.Kubernetes}},
			wantCalls: []string{
				"load " + infra + " " + m2 + " " + newer.Kubernetes + " " + all(newer),
				"kubelet " + infra + " " + m2 + " " + newer.Kubernetes,
				"write " + m2 + " " + active(release.KubeAPIServer) + " 644",
				"write " + m2 + " " + active(release.KubeControllerManager) + " 644",
				"write " + m2 + " " + active(release.KubeScheduler) + " 644",
			},
			wantFiles: map[string]string{
				active(release.KubeAPIServer):         newer.Image(release.KubeAPIServer),
				active(release.KubeControllerManager): newer.Image(release.KubeControllerManager),
				active(release.KubeScheduler):         newer.Image(release.KubeScheduler),
			},
			wantEtcd: newer.Image(release.Etcd)},
		{name: "a worker in an upgraded cluster", new: w1,
			cluster: catchUpCluster{at: newer, node: older},
			wantCalls: []string{
				"load " + infra + " " + w1 + " " + newer.Kubernetes + " " + all(newer),
				"kubelet " + infra + " " + w1 + " " + newer.Kubernetes,
			}},
		{name: "a master in a cluster whose etcd is another release's", master: true, new: m2,
			cluster:   catchUpCluster{at: newer, node: newer, etcdAt: older.Image(release.Etcd)},
			wantCalls: []string{"load " + infra + " " + m2 + " " + older.Kubernetes + " [etcd]"},
			wantEtcd:  older.Image(release.Etcd)},
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
		{name: "a node not Ready yet: its kube-proxy needs the image loaded first", new: w1,
			cluster: catchUpCluster{at: newer, node: older, notReady: true},
			wantCalls: []string{
				"load " + infra + " " + w1 + " " + newer.Kubernetes + " " + all(newer),
				"kubelet " + infra + " " + w1 + " " + newer.Kubernetes,
			}},
		{name: "a kubelet that does not come up at the new version", new: w1,
			cluster: catchUpCluster{at: newer, node: older, kubeletStuck: true},
			wantCalls: []string{
				"load " + infra + " " + w1 + " " + newer.Kubernetes + " " + all(newer),
				"kubelet " + infra + " " + w1 + " " + newer.Kubernetes,
			},
			wantErr: "Waiting for Node " + w1 + " to be Ready with kubelet " + newer.Kubernetes + ": not done after 1s: its kubelet reports " + older.Kubernetes},
		{name: "a platform that cannot load", new: w1,
			cluster: catchUpCluster{at: newer, node: older, noUpgrader: true},
			wantErr: "the cluster runs kubelet " + newer.Kubernetes + ", which the node image of " + w1 + " lacks, and platform"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, up := tt.cluster.runner(t, tt.new)
			filesBefore := maps.Clone(up.files)
			err := r.catchUp(context.Background(), tt.new, tt.master)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(up.calls, tt.wantCalls) {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(up.calls, "\n"), strings.Join(tt.wantCalls, "\n"))
			}
			for path, before := range filesBefore {
				want := before
				if img, ok := tt.wantFiles[path]; ok {
					want = manifestOf(release.Component(strings.TrimSuffix(path[strings.LastIndex(path, "/")+1:], ".yaml")), img)
				}
				if up.files[path] != want {
					t.Errorf("%s:\n%s\nwant:\n%s", path, up.files[path], want)
				}
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
	up := &fakeUpgrader{files: map[string]string{}}
	if !c.kubeletStuck {
		up.kube = kube
	}
	dir := nodelayout.StagedPodDir
	if c.activated {
		dir = nodelayout.StaticPodDir
	}
	for _, comp := range controlPlane()[1:] {
		up.files[dir+"/"+string(comp)+".yaml"] = manifestOf(comp, c.node.Image(comp))
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
