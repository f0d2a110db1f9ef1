package upgrade

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/cmd/cluster/handover"
)

// live is a running cluster as the API and etcd show it: masters at k8s
// with etcd members at etcd, workers at k8s, every node and pod Ready;
// master-1's member leads.
type live struct {
	objects []runtime.Object
	etcd    []etcdmembers.Health
}

func newLive(masters, workers []string, k8s, etcd string) *live {
	l := &live{}
	ready := func() corev1.NodeStatus {
		return corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: k8s},
		}
	}
	for i, m := range masters {
		l.objects = append(l.objects, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m, Labels: map[string]string{handover.ControlPlaneLabel: ""}}, Status: ready()})
		for _, c := range masterComponents {
			tag := k8s
			if c == Etcd {
				tag = "v" + etcd
			}
			l.objects = append(l.objects, staticPod(m, c, "kiln.local/"+string(c)+":"+tag, true))
		}
		l.etcd = append(l.etcd, etcdmembers.Health{
			Member: &etcdserverpb.Member{ID: uint64(100 + i), Name: m, ClientURLs: []string{"https://" + m + ":2379"}},
			Status: &clientv3.StatusResponse{Version: etcd, Leader: 101},
		})
	}
	for _, w := range workers {
		l.objects = append(l.objects, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w}, Status: ready()})
	}
	l.objects = append(l.objects,
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: Namespace},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "kiln.local/kube-proxy:" + k8s}}}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: Namespace},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "kiln.local/coredns:v1.15.0"}}}}}},
	)
	return l
}

// staticPod is the mirror pod of master's static pod of c.
func staticPod(master string, c Component, image string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: string(c) + "-" + master, Namespace: Namespace,
			Labels: map[string]string{componentLabel: string(c), "tier": "control-plane"}},
		Spec:   corev1.PodSpec{NodeName: master, Containers: []corev1.Container{{Name: string(c), Image: image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func (l *live) client() *fake.Clientset { return fake.NewClientset(l.objects...) }

// edit changes the object of kind T named name.
func edit[T runtime.Object](l *live, name string, f func(T)) {
	for _, o := range l.objects {
		if t, ok := o.(T); ok && o.(metav1.Object).GetName() == name {
			f(t)
			return
		}
	}
	panic("no object " + name)
}

var errDown = errors.New("context deadline exceeded")

// removeObject drops the object named name.
func removeObject(objs []runtime.Object, name string) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		if o.(metav1.Object).GetName() != name {
			out = append(out, o)
		}
	}
	return out
}

// observe is Observe of l's API, with etcd's answer etcd.
func observe(t *testing.T, l *live, etcd []etcdmembers.Health) Observed {
	t.Helper()
	o, err := Observe(context.Background(), l.client(), etcd)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
