package bootkube

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// bootstrapPods are the bootstrap machine's control-plane static pods.
func bootstrapPods() []string {
	return []string{"etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"}
}

// staticPodDirs makes a kubelet static pod directory holding bootstrapPods
// (each file's content is its name) and names a retired directory beside it.
func staticPodDirs(t *testing.T) (pods, retired string) {
	t.Helper()
	dir := t.TempDir()
	pods, retired = filepath.Join(dir, "manifests"), filepath.Join(dir, "retired")
	if err := os.Mkdir(pods, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range bootstrapPods() {
		if err := os.WriteFile(filepath.Join(pods, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return pods, retired
}

func TestRetireMovesStaticPodsOnceAndKeepsTheRest(t *testing.T) {
	pods, retired := staticPodDirs(t)
	r := newRetirer(Config{StaticPodDir: pods, RetiredPodDir: retired})
	moved, err := r.retire(retireBeforeRemoval())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(moved, retireBeforeRemoval()) {
		t.Fatalf("moved %v, want %v", moved, retireBeforeRemoval())
	}
	if left := names(t, pods); !reflect.DeepEqual(left, []string{"etcd.yaml"}) {
		t.Fatalf("static pods left %v, want only etcd (its member still votes)", left)
	}
	if data, err := os.ReadFile(filepath.Join(retired, "kube-apiserver.yaml")); err != nil || string(data) != "kube-apiserver.yaml" {
		t.Fatalf("retired API server pod: %q, %v", data, err)
	}
	// A restarted bootkube retires again: nothing left to move, no error.
	if moved, err := r.retire(retireBeforeRemoval()); err != nil || len(moved) != 0 {
		t.Fatalf("second retire: moved %v, %v", moved, err)
	}
	if _, err := r.retire(retireAfterComplete()); err != nil {
		t.Fatal(err)
	}
	if left := names(t, pods); len(left) != 0 {
		t.Fatalf("static pods left after etcd retired: %v", left)
	}
}

func TestWaitClosedSeesTheAPIServerStop(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := retirer{apiAddress: l.Addr().String(), every: 10 * time.Millisecond, timeout: 5 * time.Second}
	done := make(chan bool, 1)
	go func() { done <- r.waitClosed(context.Background()) }()
	select {
	case <-done:
		t.Fatal("returned while the port accepted connections")
	case <-time.After(100 * time.Millisecond):
	}
	l.Close()
	select {
	case closed := <-done:
		if !closed {
			t.Fatal("reported the port still open after it closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not notice the port closing")
	}
}

func TestWaitClosedGivesUpAtItsTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := retirer{apiAddress: l.Addr().String(), every: 10 * time.Millisecond, timeout: 100 * time.Millisecond}
	if r.waitClosed(context.Background()) {
		t.Fatal("reported closed while the port was open")
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestReleaseLeasesDeletesOnlyTheBootstrapsOwn(t *testing.T) {
	lease := func(name, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, ResourceVersion: "7"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	}
	c := fake.NewSimpleClientset(
		lease("kube-controller-manager", "c1-boot_0f3a"),
		lease("kube-scheduler", "c1-boot-2_99aa"), // another machine whose name starts alike
		lease("other", "c1-boot_1234"),            // not a controller lease of the bootstrap's
	)
	log := logrus.New()
	log.SetOutput(io.Discard)
	releaseLeases(context.Background(), c, "c1-boot", log)
	left, err := c.CoordinationV1().Leases(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range left.Items {
		got = append(got, l.Name)
	}
	if want := []string{"kube-scheduler", "other"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leases left %v, want %v", got, want)
	}
}
