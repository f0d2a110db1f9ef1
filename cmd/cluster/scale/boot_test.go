package scale

import (
	"bytes"
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

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

// withFile returns the Ignition config full with a file at path.
func withFile(t *testing.T, full []byte, path, data string) []byte {
	t.Helper()
	cfg, err := ignition.Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	ignition.AddFile(&cfg, path, 0o644, []byte(data))
	raw, err := ignition.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// setRunning makes r's cluster run release at: every Node's kubelet, the
// masters' control-plane pods, kube-proxy and CoreDNS.
func setRunning(t *testing.T, r *Runner, at release.Release) {
	t.Helper()
	ctx := context.Background()
	kube := r.Kube
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		n.Status.NodeInfo.KubeletVersion = at.Kubernetes
		if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, &n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range r.Cluster.Shape.Masters {
		for _, c := range controlPlane() {
			if _, err := kube.CoreV1().Pods("kube-system").Create(ctx, staticPod(c, m, at.Image(c)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: KubeProxyDaemonSet, Namespace: "kube-system"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: string(release.KubeProxy), Image: at.Image(release.KubeProxy)}}
	if _, err := kube.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: CoreDNSDeployment, Namespace: "kube-system"}}
	dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: string(release.CoreDNS), Image: at.Image(release.CoreDNS)}}
	if _, err := kube.AppsV1().Deployments("kube-system").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestBootRelease: a machine added boots the release every other node
// runs, recorded only when it is not the install-config's; a cluster
// part-way through an upgrade (kubelets, control plane or add-ons at two
// releases) and a kubelet kiln does not pin are refused, naming what runs
// where, and nothing is recorded.
func TestBootRelease(t *testing.T) {
	older, newer := previousMinor(t), release.Default()
	m1, w1 := infra+"-master-1", infra+"-worker-1"
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		node   string
		master bool
		// change turns the cluster, running newer, into the case's.
		change  func(t *testing.T, r *Runner)
		want    string
		wantErr string
	}{
		{name: "a worker of an upgraded cluster", node: w1, want: newer.Kubernetes},
		{name: "a master of an upgraded cluster", node: m1, master: true, want: newer.Kubernetes},
		{name: "kubelets at two releases", node: w1, change: func(t *testing.T, r *Runner) {
			n, _ := r.Kube.CoreV1().Nodes().Get(ctx, infra+"-worker-0", metav1.GetOptions{})
			n.Status.NodeInfo.KubeletVersion = older.Kubernetes
			if _, err := r.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "the nodes' kubelets run different versions (" + older.Kubernetes + " on " + infra + "-worker-0; " + newer.Kubernetes + " on " + infra + "-master-0): an upgrade is under way"},
		{name: "a control plane behind the kubelets", node: m1, master: true, change: func(t *testing.T, r *Runner) {
			p := staticPod(release.KubeScheduler, infra+"-master-0", older.Image(release.KubeScheduler))
			if _, err := r.Kube.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "the cluster runs " + older.Image(release.KubeScheduler) + " while its kubelets run " + newer.Kubernetes + ", whose kube-scheduler is " + newer.Image(release.KubeScheduler) + ": an upgrade is under way"},
		{name: "kube-proxy behind the kubelets", node: w1, change: func(t *testing.T, r *Runner) {
			ds, _ := r.Kube.AppsV1().DaemonSets("kube-system").Get(ctx, KubeProxyDaemonSet, metav1.GetOptions{})
			ds.Spec.Template.Spec.Containers[0].Image = older.Image(release.KubeProxy)
			if _, err := r.Kube.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "the cluster runs " + older.Image(release.KubeProxy) + " while its kubelets run " + newer.Kubernetes},
		{name: "a kubelet kiln does not pin", node: w1, change: func(t *testing.T, r *Runner) {
			nodes, _ := r.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			for _, n := range nodes.Items {
				n.Status.NodeInfo.KubeletVersion = "v1.20.0"
				if _, err := r.Kube.CoreV1().Nodes().UpdateStatus(ctx, &n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}, wantErr: "the nodes' kubelets run v1.20.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _ := newTestRunner(t, 1, 1)
			r.Cluster.Resolved.Release = older
			setRunning(t, r, newer)
			etcd := manifestOf(release.Etcd, older.Image(release.Etcd)) + "    - --data-dir=/var/lib/etcd\n"
			r.PKI.Manifest = etcd
			if tt.change != nil {
				tt.change(t, r)
			}
			rel, err := r.bootRelease(ctx, tt.node, tt.master)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if got := r.Cluster.Releases[tt.node]; got != tt.want || rel.Kubernetes != tt.want && tt.want != "" {
				t.Errorf("release %q, recorded %q; want %q", rel.Kubernetes, got, tt.want)
			}
			wantEtcd := etcd
			if tt.master && err == nil {
				wantEtcd = manifestOf(release.Etcd, newer.Image(release.Etcd)) + "    - --data-dir=/var/lib/etcd\n    - --snapshot-count=100\n"
			}
			if r.PKI.Manifest != wantEtcd {
				t.Errorf("etcd static pod:\n%s\nwant:\n%s", r.PKI.Manifest, wantEtcd)
			}
		})
	}
}

// TestWithRelease: the control-plane static pods of a full config, active
// and staged, name the release's images; its other files stay as they
// were, and a config with no such pod is returned as it was.
func TestWithRelease(t *testing.T) {
	older, newer := previousMinor(t), release.Default()
	full := fullConfig(t)
	if got, err := withRelease(full, newer); err != nil || !bytes.Equal(got, full) {
		t.Errorf("a config without static pods changed (%v):\n%s", err, got)
	}
	other := manifestOf(release.KubeProxy, older.Image(release.KubeProxy))
	full = withFile(t, full, nodelayout.StagedPodDir+"/kube-apiserver.yaml", manifestOf(release.KubeAPIServer, older.Image(release.KubeAPIServer)))
	full = withFile(t, full, nodelayout.StaticPodDir+"/kube-scheduler.yaml", manifestOf(release.KubeScheduler, older.Image(release.KubeScheduler)))
	full = withFile(t, full, "/etc/kiln/other.yaml", other)
	got, err := withRelease(full, newer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ignition.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		nodelayout.StagedPodDir + "/kube-apiserver.yaml": manifestOf(release.KubeAPIServer, newer.Image(release.KubeAPIServer)),
		nodelayout.StaticPodDir + "/kube-scheduler.yaml": manifestOf(release.KubeScheduler, newer.Image(release.KubeScheduler)),
		"/etc/kiln/other.yaml":                           other,
	} {
		if data, _, err := ignition.FileContents(cfg, path); err != nil || string(data) != want {
			t.Errorf("%s = %q (%v), want %q", path, data, err, want)
		}
	}
	if _, err := withRelease(withFile(t, fullConfig(t), nodelayout.StagedPodDir+"/etcd.yaml", "kind: Pod\n"), newer); err == nil ||
		!strings.Contains(err.Error(), nodelayout.StagedPodDir+"/etcd.yaml: no image") {
		t.Errorf("a static pod naming no image of its component: %v", err)
	}
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
