// Package noderelease asks a node's machine-config agent for a release of
// its components and reads whether it got there: the Node's
// kiln.dev/desired-release annotation, which kiln upgrade cluster and
// kiln scale cluster set, and kiln.dev/current-release, which the agent
// sets to the same value once the node runs it (docs/machine-config.md,
// "Upgrades").
package noderelease

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// APIRetry is how long a call retries while the API does not answer: an
// API server that restarts (a single master's) is back within it.
const APIRetry = 2 * time.Minute

// Ask sets node's desired release of each component of versions
// (component name to Kubernetes release version), keeping what it asks
// for the others. It retries while the API does not answer.
func Ask(ctx context.Context, kube kubernetes.Interface, node string, versions map[string]string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, APIRetry, true, func(ctx context.Context) (bool, error) {
		last = ask(ctx, kube, node, versions)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("asking %s for its release: %w", node, last)
	}
	return err
}

func ask(ctx context.Context, kube kubernetes.Interface, node string, versions map[string]string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want, err := machineconfig.ParseNodeRelease(n.Annotations[machineconfig.DesiredReleaseAnnotation])
	if err != nil {
		// A value no agent can act on is replaced.
		want = machineconfig.NodeRelease{}
	}
	for c, v := range versions {
		want = want.With(c, v)
	}
	value := want.String()
	if n.Annotations[machineconfig.DesiredReleaseAnnotation] == value {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{machineconfig.DesiredReleaseAnnotation: value},
		"resourceVersion": n.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Applied returns nil once node's agent runs what node's desired release
// asks for, else an error saying what it does or why it cannot (its
// state and reason).
func Applied(ctx context.Context, kube kubernetes.Interface, node string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	a := n.Annotations
	desired := a[machineconfig.DesiredReleaseAnnotation]
	if desired == a[machineconfig.CurrentReleaseAnnotation] {
		return nil
	}
	switch state := a[machineconfig.StateAnnotation]; {
	case state == machineconfig.StateDegraded || state == machineconfig.StateWorking:
		return fmt.Errorf("the machine-config agent of %s has not brought it to %s yet: %s, %s", node, desired, state, a[machineconfig.ReasonAnnotation])
	default:
		return fmt.Errorf("the machine-config agent of %s has not brought it to %s yet (it reports %q)", node, desired, a[machineconfig.CurrentReleaseAnnotation])
	}
}
