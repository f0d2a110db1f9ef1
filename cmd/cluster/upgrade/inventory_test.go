package upgrade

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kiln-project/kiln/assets/release"
)

func TestInventory(t *testing.T) {
	l := newLive([]string{"master-0", "master-1", "master-2"}, []string{"worker-0", "worker-1"}, "v1.35.4", "3.5.35")
	// An upgrade begun before: master-0's member and API server are new,
	// its pod says so and the member too.
	edit(l, "kube-apiserver-master-0", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "kiln.local/kube-apiserver:v1.36.3" })
	l.etcd[0].Status.Version = "3.6.16"
	// A member that did not answer keeps its image's version.
	l.etcd[2].Status, l.etcd[2].Err = nil, errDown
	edit(l, "etcd-master-2", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "kiln.local/etcd:v3.5.34" })
	// A worker whose kubelet reports a suffixed version.
	edit(l, "worker-1", func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.35.4+kiln" })

	got, err := Inventory(context.Background(), l.client(), observe(t, l, l.etcd))
	if err != nil {
		t.Fatal(err)
	}
	k := v("v1.35.4")
	masterAt := func(etcd, api string) map[Component]release.Version {
		return map[Component]release.Version{Etcd: v(etcd), KubeAPIServer: v(api), KubeControllerManager: k, KubeScheduler: k, Kubelet: k}
	}
	want := State{
		Nodes: []Node{
			{Name: "master-0", Master: true, Versions: masterAt("3.6.16", "v1.36.3")},
			{Name: "master-1", Master: true, Versions: masterAt("3.5.35", "v1.35.4")},
			{Name: "master-2", Master: true, Versions: masterAt("3.5.34", "v1.35.4")},
			{Name: "worker-0", Versions: map[Component]release.Version{Kubelet: k}},
			{Name: "worker-1", Versions: map[Component]release.Version{Kubelet: k}},
		},
		Addons:     map[Component]release.Version{KubeProxy: k, CoreDNS: v("v1.15.0")},
		EtcdLeader: "master-1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inventory:\n got %+v\nwant %+v", got, want)
	}
}

func TestInventoryLeavesWhatItCannotReadUnknown(t *testing.T) {
	l := newLive([]string{"master-0"}, nil, "v1.35.4", "3.5.35")
	edit(l, "kube-scheduler-master-0", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example:5000/sched:latest" })
	got, err := Inventory(context.Background(), l.client(), observe(t, l, l.etcd))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.node("master-0").Versions[KubeScheduler]; !s.IsZero() {
		t.Errorf("a tag that is not a version: got %s, want unknown", s)
	}
}

func TestImageVersion(t *testing.T) {
	for img, want := range map[string]release.Version{
		"kiln.local/etcd:v3.5.35":      {Major: 3, Minor: 5, Patch: 35},
		"registry:5000/kube-proxy":     {},
		"kiln.local/coredns:v1.15.0":   {Major: 1, Minor: 15, Patch: 0},
		"kiln.local/kube-proxy:latest": {},
	} {
		if got := imageVersion([]corev1.Container{{Name: "x", Image: img}}, "y"); got != want {
			t.Errorf("imageVersion(%q) = %v, want %v", img, got, want)
		}
	}
}
