package rotateca

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition/certbundle"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

func journal(phase string) *Journal {
	j := &Journal{Run: "r1", Phase: phase, Old: map[string][]byte{}, New: map[string]kilntls.CertKey{}}
	for _, id := range kilntls.RotatedCAIDs() {
		j.Old[id] = []byte("old " + id + "\n")
		j.New[id] = kilntls.CertKey{Cert: []byte("new " + id + "\n"), Key: []byte("key")}
	}
	return j
}

func TestTrustFilesByPhase(t *testing.T) {
	root, etcd := (&kilntls.RootCA{}).ID(), (&kilntls.EtcdCA{}).ID()
	for _, tc := range []struct {
		phase string
		want  string
	}{
		{certbundle.PhaseIntroduce, "old X\nnew X\n"},
		{certbundle.PhaseReissue, "old X\nnew X\n"},
		{certbundle.PhaseKubelets, "old X\nnew X\n"},
		{certbundle.PhaseRetire, "new X\n"},
	} {
		j := journal(tc.phase)
		master := trustFiles(j, true)
		var paths []string
		for _, f := range master {
			paths = append(paths, f.Path)
			if !certbundle.RotationWritable(f.Path) {
				t.Errorf("%s: a node refuses %s", tc.phase, f.Path)
			}
		}
		want := []string{nodelayout.PKIDir + "/ca.crt", nodelayout.PKIDir + "/client-ca.crt", nodelayout.PKIDir + "/kubelet-serving-ca.crt",
			nodelayout.PKIDir + "/front-proxy-ca.crt", nodelayout.EtcdPKIDir + "/ca.crt"}
		if !slices.Equal(paths, want) {
			t.Errorf("%s: master trust files %v, want %v", tc.phase, paths, want)
		}
		if got, w := string(master[0].Data), strings.ReplaceAll(tc.want, "X", root); got != w {
			t.Errorf("%s: ca.crt %q, want %q", tc.phase, got, w)
		}
		if got, w := string(master[4].Data), strings.ReplaceAll(tc.want, "X", etcd); got != w {
			t.Errorf("%s: etcd ca.crt %q, want %q", tc.phase, got, w)
		}
		if worker := trustFiles(j, false); len(worker) != 1 || worker[0].Path != nodelayout.PKIDir+"/ca.crt" {
			t.Errorf("%s: worker trust files %v", tc.phase, worker)
		}
	}
}

func TestSigningFilesAreWritable(t *testing.T) {
	cas := map[string]kilntls.CertKey{}
	for id, ck := range journal(certbundle.PhaseIntroduce).New {
		cas[id] = ck
	}
	for _, f := range signingFiles(cas) {
		if !certbundle.RotationWritable(f.Path) || len(f.Data) == 0 {
			t.Errorf("%s: writable %v, %d bytes", f.Path, certbundle.RotationWritable(f.Path), len(f.Data))
		}
		if strings.HasSuffix(f.Path, ".key") && f.Mode != 0o600 {
			t.Errorf("%s: mode %o", f.Path, f.Mode)
		}
	}
}

func TestNodeArgv(t *testing.T) {
	got := strings.Join(NodeArgv(5*time.Minute, true), " ")
	if got != "/usr/local/bin/kiln node ca-rotate --bundle=/var/lib/kiln/ca-rotation.json --timeout=5m0s --lock" {
		t.Errorf("master: %s", got)
	}
	if got := NodeArgv(time.Minute, false); slices.Contains(got, "--lock") {
		t.Errorf("worker: %v", got)
	}
}

func TestRestartWorkloadsPatchesAndWaits(t *testing.T) {
	one := int32(1)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Spec: appsv1.DeploymentSpec{Replicas: &one},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}}
	onDelete := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "apps"},
		Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}}
	stuck := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: appsv1.StatefulSetSpec{Replicas: &one},
		Status: appsv1.StatefulSetStatus{UpdatedReplicas: 1, ReadyReplicas: 0, CurrentRevision: "a", UpdateRevision: "b"}}
	cs := fake.NewClientset(dep, ds, onDelete, stuck)
	ctx := context.Background()
	_, err := restartWorkloads(ctx, cs, "r1-introduce", 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "StatefulSet apps/web") || strings.Contains(err.Error(), "coredns") {
		t.Errorf("err = %v, want only the stuck StatefulSet named", err)
	}
	got, _ := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if got.Spec.Template.Annotations[RestartAnnotation] != "r1-introduce" {
		t.Errorf("the Deployment's template: %v", got.Spec.Template.Annotations)
	}
	db, _ := cs.AppsV1().StatefulSets("apps").Get(ctx, "db", metav1.GetOptions{})
	if _, ok := db.Spec.Template.Annotations[RestartAnnotation]; ok {
		t.Error("an OnDelete StatefulSet was restarted")
	}
	if err := cs.AppsV1().StatefulSets("apps").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := restartWorkloads(ctx, cs, "r1-retire", time.Second); err != nil || n != 2 {
		t.Errorf("restarted %d, %v; want 2", n, err)
	}
}

func TestWaitRootCA(t *testing.T) {
	root := (&kilntls.RootCA{}).ID()
	a, _ := kilntls.NewCA(context.Background(), kilntls.ECDSAP256, root)
	b, _ := kilntls.NewCA(context.Background(), kilntls.ECDSAP256, root)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "kube-system"}, Data: map[string]string{"ca.crt": string(a.Cert)}}
	cs := fake.NewClientset(cm)
	ctx := context.Background()
	both := slices.Concat(b.Cert, a.Cert)
	if err := waitRootCA(ctx, cs, both, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "1 certificates, not the 2") {
		t.Errorf("one of two: %v", err)
	}
	cm.Data["ca.crt"] = string(slices.Concat(a.Cert, b.Cert)) // another order
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitRootCA(ctx, cs, both, time.Second); err != nil {
		t.Error(err)
	}
	if bytes.Equal(a.Cert, b.Cert) {
		t.Fatal("two CAs alike")
	}
}

func TestUnderWayNamesTheRotation(t *testing.T) {
	dir := t.TempDir()
	if err := UnderWay(dir, "renewing certificates"); err != nil {
		t.Fatalf("no rotation: %v", err)
	}
	if err := graph.SaveRecord(dir, installdir.RotateCAJournal, journal(certbundle.PhaseKubelets)); err != nil {
		t.Fatal(err)
	}
	err := UnderWay(dir, "renewing certificates")
	if err == nil || !strings.Contains(err.Error(), "CA rotation r1") || !strings.Contains(err.Error(), "phase kubelets") || !strings.Contains(err.Error(), "before renewing certificates") {
		t.Errorf("err = %v", err)
	}
}
