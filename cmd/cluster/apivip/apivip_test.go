package apivip

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/cmd/cluster/internal/kubetest"
)

// Off waits for another master than the one leaving, and names what
// MetalLB records when the VIP does not move; On takes the label off; a
// master without a Node, or without another master, is left alone.
func TestOffOn(t *testing.T) {
	announcer := "m-0"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Get("labelSelector") != "metallb.io/service-namespace=kube-system,metallb.io/service-name=kiln-api" {
			http.NotFound(w, req)
			return
		}
		fmt.Fprintf(w, `{"items":[{"status":{"node":%q}}]}`, announcer)
	}))
	defer srv.Close()
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m-0"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m-1"}})
	m := Mover{Kube: kubetest.Serve(kube, srv.URL), Poll: time.Millisecond, Timeout: 100 * time.Millisecond}
	ctx := context.Background()
	label := func() (string, bool) {
		n, _ := kube.CoreV1().Nodes().Get(ctx, "m-0", metav1.GetOptions{})
		v, ok := n.Labels[ExcludeLabel]
		return v, ok
	}

	err := m.Off(ctx, "m-0", []string{"m-0", "m-1"})
	if err == nil || !strings.Contains(err.Error(), "did not move off m-0 to one of [m-1]") || !strings.Contains(err.Error(), "MetalLB records it announced from [m-0]") {
		t.Errorf("the VIP stays: %v", err)
	}
	// No record at all when the wait ends: MetalLB lost it; the master is
	// labelled out, so Off goes on, and says so.
	announcer = ""
	var warned string
	lenient := m
	lenient.Warn = func(s string) { warned = s }
	if err := lenient.Off(ctx, "m-0", []string{"m-1"}); err != nil || !strings.Contains(warned, "MetalLB records no master announcing the API VIP") || !strings.Contains(warned, "m-0 is labelled out") {
		t.Errorf("no record: %v; warned %q", err, warned)
	}
	if _, ok := label(); !ok {
		t.Error("m-0 not labelled out")
	}
	announcer = "m-1"
	if err := m.Off(ctx, "m-0", []string{"m-1"}); err != nil {
		t.Errorf("the VIP moved: %v", err)
	}
	if err := m.On(ctx, "m-0"); err != nil {
		t.Fatal(err)
	}
	if _, ok := label(); ok {
		t.Error("m-0 still labelled out after On")
	}
	for _, c := range []struct {
		master string
		others []string
	}{{"gone", []string{"m-1"}}, {"m-0", []string{"m-0"}}} {
		if err := m.Off(ctx, c.master, c.others); err != nil {
			t.Errorf("Off(%s, %v): %v", c.master, c.others, err)
		}
	}
	if _, ok := label(); ok {
		t.Error("the last master was labelled out")
	}
	if err := m.On(ctx, "gone"); err != nil {
		t.Errorf("On of a master without a Node: %v", err)
	}
	// A label the user set is theirs: Off leaves it, On keeps it.
	patch := `{"metadata":{"labels":{"` + ExcludeLabel + `":""}}}`
	if _, err := kube.CoreV1().Nodes().Patch(ctx, "m-0", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Off(ctx, "m-0", []string{"m-1"}); err != nil {
		t.Fatal(err)
	}
	if err := m.On(ctx, "m-0"); err != nil {
		t.Fatal(err)
	}
	if _, ok := label(); !ok {
		t.Error("On took off the user's own label")
	}
}

// TestOffNudges: when MetalLB has no record of who announces the VIP,
// Off nudges the speakers (the Service's annotation changes), and returns
// once the announcer's record is written again.
func TestOffNudges(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m-0"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m-1"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kiln-api"}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		svc, err := kube.CoreV1().Services("kube-system").Get(ctx, "kiln-api", metav1.GetOptions{})
		if err == nil && svc.Annotations[NudgeAnnotation] != "" {
			fmt.Fprint(w, `{"items":[{"status":{"node":"m-1"}}]}`)
			return
		}
		fmt.Fprint(w, `{"items":[]}`)
	}))
	defer srv.Close()
	m := Mover{Kube: kubetest.Serve(kube, srv.URL), Poll: time.Millisecond, Timeout: 200 * time.Millisecond, NudgeAfter: 20 * time.Millisecond}
	if err := m.Off(ctx, "m-0", []string{"m-1"}); err != nil {
		t.Errorf("Off with the record lost: %v", err)
	}
	svc, _ := kube.CoreV1().Services("kube-system").Get(ctx, "kiln-api", metav1.GetOptions{})
	if _, err := time.Parse(time.RFC3339Nano, svc.Annotations[NudgeAnnotation]); err != nil {
		t.Errorf("the Service's %s = %q: %v", NudgeAnnotation, svc.Annotations[NudgeAnnotation], err)
	}
}
