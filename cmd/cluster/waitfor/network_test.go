package waitfor

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type testProber struct{}

func (testProber) ProbeContainer(name string, args ...string) (corev1.Container, []corev1.Volume) {
	return corev1.Container{Name: name, Image: "probe", Command: append([]string{"probe"}, args...)}, nil
}

func labelled(name string, master bool) *corev1.Node {
	n := readyNode(name, true)
	if master {
		n.Labels = map[string]string{controlPlaneLabel: ""}
	}
	return n
}

func TestProbeNodes(t *testing.T) {
	for _, tc := range []struct {
		nodes          []*corev1.Node
		server, client string
	}{
		{[]*corev1.Node{labelled("m-0", true), labelled("w-0", false)}, "m-0", "w-0"},
		{[]*corev1.Node{labelled("m-0", true)}, "m-0", "m-0"},
		{[]*corev1.Node{labelled("w-0", false)}, "w-0", "w-0"},
	} {
		w, client, _ := waiter()
		for _, n := range tc.nodes {
			client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
		}
		s, c, err := w.probeNodes(context.Background())
		if err != nil || s != tc.server || c != tc.client {
			t.Errorf("probeNodes = %s, %s, %v; want %s, %s", s, c, err, tc.server, tc.client)
		}
	}
}

// A client pod that succeeds without the expected answer fails the check
// as an install error, and the check's objects are removed either way.
func TestNetworkCheckVerifiesTheAnswerAndCleansUp(t *testing.T) {
	w, client, _ := waiter()
	ctx := context.Background()
	client.CoreV1().Nodes().Create(ctx, labelled("m-0", true), metav1.CreateOptions{})
	client.CoreV1().Nodes().Create(ctx, labelled("w-0", false), metav1.CreateOptions{})
	go func() {
		for i := 0; i < 200; i++ {
			p, err := client.CoreV1().Pods(installerNamespace).Get(ctx, probeClient, metav1.GetOptions{})
			if err == nil {
				if cmd := strings.Join(p.Spec.Containers[0].Command, " "); p.Spec.NodeName != "w-0" || !strings.Contains(cmd, "--resolve=kubernetes.default") || !strings.Contains(cmd, "--retry=30s") {
					t.Errorf("client pod = %+v", p.Spec)
				}
				p.Status.Phase = corev1.PodSucceeded
				client.CoreV1().Pods(installerNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err := w.NetworkCheck(ctx, testProber{}, 5*time.Second)
	// The fake clientset's pod logs are "fake logs": not a probe's answer.
	if err == nil || !strings.Contains(err.Error(), "answered") {
		t.Fatalf("err = %v", err)
	}
	pods, _ := client.CoreV1().Pods(installerNamespace).List(ctx, metav1.ListOptions{})
	svcs, _ := client.CoreV1().Services(installerNamespace).List(ctx, metav1.ListOptions{})
	if len(pods.Items)+len(svcs.Items) != 0 {
		t.Errorf("left behind: %d pods, %d services", len(pods.Items), len(svcs.Items))
	}
}
