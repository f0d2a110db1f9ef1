package scale

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/assets/release"
)

// loadRecorder is a platforms.Upgrader that records LoadRelease; the
// rest is not called by a scale.
type loadRecorder struct{ loads []string }

func (l *loadRecorder) PrepareRelease(context.Context, string) error { return fmt.Errorf("not here") }
func (l *loadRecorder) LoadRelease(_ context.Context, infraID, node, version string, cs []release.Component) error {
	l.loads = append(l.loads, fmt.Sprintf("%s %s %s %v", infraID, node, version, cs))
	return nil
}
func (l *loadRecorder) InstallKubelet(context.Context, string, string, string) error {
	return fmt.Errorf("not here")
}
func (l *loadRecorder) ReadNodeFile(context.Context, string, string, string) ([]byte, error) {
	return nil, fmt.Errorf("not here")
}
func (l *loadRecorder) WriteNodeFile(context.Context, string, string, string, []byte, fs.FileMode) error {
	return fmt.Errorf("not here")
}

// TestEtcdForNewMaster: a master added to a cluster upgraded since it was
// created gets the etcd its members run, loaded from that release, not the
// install-time one its node image has.
func TestEtcdForNewMaster(t *testing.T) {
	older, newer := release.Releases()[1], release.Default()
	if older.Etcd == newer.Etcd {
		t.Skip("the pinned releases run the same etcd")
	}
	manifest := "initial: x\n  image: " + older.Image(release.Etcd) + "\n"
	etcdPod := func(node, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-" + node, Namespace: "kube-system",
			Labels: map[string]string{"component": "etcd", "tier": "control-plane"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "etcd", Image: image}}}}
	}
	for _, tt := range []struct {
		name       string
		pods       []*corev1.Pod
		noUpgrader bool
		wantImage  string // in the manifest after
		wantLoad   bool
		wantErr    string
	}{
		{name: "the install-time etcd", pods: []*corev1.Pod{etcdPod("m-0", older.Image(release.Etcd)), etcdPod("m-1", older.Image(release.Etcd))},
			wantImage: older.Image(release.Etcd)},
		{name: "an upgraded etcd", pods: []*corev1.Pod{etcdPod("m-0", newer.Image(release.Etcd)), etcdPod("m-1", newer.Image(release.Etcd)),
			// The replaced master's own old pod does not count.
			etcdPod("m-2", older.Image(release.Etcd))},
			wantImage: newer.Image(release.Etcd), wantLoad: true},
		{name: "an upgrade under way", pods: []*corev1.Pod{etcdPod("m-0", newer.Image(release.Etcd)), etcdPod("m-1", older.Image(release.Etcd))},
			wantImage: older.Image(release.Etcd),
			wantErr:   "the etcd members run different images (" + older.Image(release.Etcd) + " on m-1; " + newer.Image(release.Etcd) + " on m-0): an upgrade is under way"},
		{name: "an etcd kiln does not pin", pods: []*corev1.Pod{etcdPod("m-0", "kiln.local/etcd:v3.4.0")},
			wantImage: older.Image(release.Etcd), wantErr: "no release kiln pins runs kiln.local/etcd:v3.4.0"},
		{name: "a platform that cannot load", pods: []*corev1.Pod{etcdPod("m-0", newer.Image(release.Etcd))}, noUpgrader: true,
			wantImage: older.Image(release.Etcd), wantErr: "cannot load images onto a machine"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _ := newTestRunner(t, 1, 0)
			for _, p := range tt.pods {
				if _, err := r.Kube.CoreV1().Pods("kube-system").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			up := &loadRecorder{}
			if !tt.noUpgrader {
				r.Upgrader = up
			}
			r.PKI.Manifest = manifest
			err := r.etcdForNewMaster(context.Background(), "m-2")
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if want := strings.Replace(manifest, older.Image(release.Etcd), tt.wantImage, 1); r.PKI.Manifest != want {
				t.Errorf("manifest:\n%s\nwant:\n%s", r.PKI.Manifest, want)
			}
			wantLoads := []string(nil)
			if tt.wantLoad {
				wantLoads = []string{fmt.Sprintf("%s m-2 %s [etcd]", infra, newer.Kubernetes)}
			}
			if !slices.Equal(up.loads, wantLoads) {
				t.Errorf("loads %q, want %q", up.loads, wantLoads)
			}
		})
	}
}
