package mcagent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// TestOnce walks the agent through a node's life with fake clients:
// it applies the config its Node asks for and reports it, reports a hand
// edit as Degraded naming the file, and Done again once the file is back.
func TestOnce(t *testing.T) {
	r := render(t, "storage: {files: [{path: /etc/agent-test.conf, contents: {source: 'data:,one'}}]}", "")
	obj, err := r.Object()
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{machineconfig.MachineConfigs: "MachineConfigList"}, &unstructured.Unstructured{Object: m})
	client := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1",
		Annotations: map[string]string{machineconfig.DesiredConfigAnnotation: r.Name}}})
	p := testPaths(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	ag := &agent{cfg: Config{NodeName: "w1", Paths: p, Log: log}, a: newApplier(p, &recorder{}), client: client, dyn: dyn}
	ctx := context.Background()
	annotations := func() map[string]string {
		n, err := client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations
	}

	if err := ag.once(ctx); err != nil {
		t.Fatal(err)
	}
	a := annotations()
	if a[machineconfig.CurrentConfigAnnotation] != r.Name || a[machineconfig.StateAnnotation] != machineconfig.StateDone {
		t.Fatalf("after applying: %v", a)
	}
	if got := read(t, p, "/etc/agent-test.conf"); got != "one" {
		t.Errorf("file %q", got)
	}

	if err := os.WriteFile(filepath.Join(p.Root, "etc/agent-test.conf"), []byte("by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ag.once(ctx); err != nil {
		t.Fatal(err)
	}
	a = annotations()
	if a[machineconfig.StateAnnotation] != machineconfig.StateDegraded || !strings.Contains(a[machineconfig.ReasonAnnotation], "/etc/agent-test.conf (content)") {
		t.Errorf("after a hand edit: %v", a)
	}
	if got := read(t, p, "/etc/agent-test.conf"); got != "by hand" {
		t.Errorf("the agent overwrote the hand edit: %q", got)
	}

	if err := os.WriteFile(filepath.Join(p.Root, "etc/agent-test.conf"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ag.once(ctx); err != nil {
		t.Fatal(err)
	}
	if a = annotations(); a[machineconfig.StateAnnotation] != machineconfig.StateDone || a[machineconfig.ReasonAnnotation] != "" {
		t.Errorf("after the file is back: %v", a)
	}

	// A desired config that does not exist is a Degraded node that says so.
	if _, err := client.CoreV1().Nodes().Patch(ctx, "w1", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"kiln.dev/desired-config":"rendered-worker-gone"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ag.once(ctx); err != nil {
		t.Fatal(err)
	}
	if a = annotations(); a[machineconfig.StateAnnotation] != machineconfig.StateDegraded || !strings.Contains(a[machineconfig.ReasonAnnotation], "rendered-worker-gone") {
		t.Errorf("with a missing config: %v", a)
	}
}
