package scale

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
	"github.com/kiln-project/kiln/cmd/cluster/apivip"
	"github.com/kiln-project/kiln/cmd/cluster/internal/kubetest"
)

// TestMoveVIPOff: a master that leaves is labelled out of the API VIP's
// announcers, and the removal goes on only once MetalLB records another
// master announcing the VIP; without a VIP kiln keeps, or without another
// master, or without its Node, nothing is asked.
func TestMoveVIPOff(t *testing.T) {
	r, _, _ := newTestRunner(t, 3, 0)
	leaving, others := r.Cluster.Shape.Masters[2], r.Cluster.Shape.Masters[:2]
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasSuffix(req.URL.Path, "/namespaces/metallb-system/servicel2statuses") ||
			req.URL.Query().Get("labelSelector") != "metallb.io/service-namespace=kube-system,metallb.io/service-name=kiln-api" {
			http.NotFound(w, req)
			return
		}
		node := leaving
		if asked.Add(1) > 2 {
			node = others[1]
		}
		fmt.Fprintf(w, `{"items":[{"status":{"node":%q}}]}`, node)
	}))
	defer srv.Close()
	kube := r.Kube.(*fake.Clientset)
	r.Kube = kubetest.Serve(kube, srv.URL)

	// No VIP kiln keeps: nothing asked, no label.
	if err := r.moveVIPOff(context.Background(), leaving, others); err != nil || asked.Load() != 0 {
		t.Fatalf("without a VIP: %v, %d asks", err, asked.Load())
	}
	r.Cluster.Config = &types.Config{Platform: types.Platform{SSH: &ssh.Platform{APIVIP: "10.0.0.5"}}}
	if err := r.moveVIPOff(context.Background(), leaving, nil); err != nil || asked.Load() != 0 {
		t.Fatalf("the last master: %v, %d asks", err, asked.Load())
	}
	if err := r.moveVIPOff(context.Background(), leaving, others); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 3 {
		t.Errorf("asked MetalLB %d times; want until another master announces (3)", asked.Load())
	}
	n, err := kube.CoreV1().Nodes().Get(context.Background(), leaving, metav1.GetOptions{})
	if _, ok := n.Labels[apivip.ExcludeLabel]; err != nil || !ok {
		t.Errorf("Node %s labels %v (%v); want %s", leaving, n.Labels, err, apivip.ExcludeLabel)
	}
	if err := r.moveVIPOff(context.Background(), "gone", others); err != nil {
		t.Errorf("a master without a Node: %v", err)
	}
}
