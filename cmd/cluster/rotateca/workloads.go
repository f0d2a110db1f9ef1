package rotateca

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	kilntls "github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/ignition/certbundle"
)

// RestartAnnotation is the pod template annotation a rotation sets on the
// cluster's Deployments, DaemonSets and StatefulSets to restart their pods
// (as `kubectl rollout restart` does with its own).
const RestartAnnotation = "kiln.dev/ca-rotation"

// KubeletServingCAConfigMap is the ConfigMap (kube-system) that clients of
// kubelets in pods (metrics-server) read the kubelet serving CA from.
const KubeletServingCAConfigMap = "kiln-kubelet-serving-ca"

// poll is how often the waits after a phase look again.
const poll = 2 * time.Second

// after waits until the API answers and every node is Ready after j's
// phase; after the introduce and retire phases it also publishes the
// kubelet serving CA of the phase, waits until kube-controller-manager
// publishes the root CA of the phase in kube-root-ca.crt, and restarts the
// workloads so that their pods read them.
func (r *Rotation) after(ctx context.Context, j *Journal, timeout time.Duration) error {
	api, err := r.API()
	if err != nil {
		return err
	}
	if _, err := api.API(ctx, api.Server, timeout); err != nil {
		return exitcode.With(exitcode.Install, fmt.Errorf("the API after phase %s: %w", j.Phase, err))
	}
	if err := api.InstallComplete(ctx, r.Cluster.Nodes(), timeout); err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	if j.Phase == certbundle.PhaseReissue && r.Refresh != nil {
		end := r.Progress.Start("Giving the platform's controllers on the host the new admin kubeconfig")
		err := r.Refresh(ctx)
		end(err)
		if err != nil {
			return exitcode.With(exitcode.Install, err)
		}
	}
	if j.Phase != certbundle.PhaseIntroduce && j.Phase != certbundle.PhaseRetire {
		return nil
	}
	cs := api.Client
	if err := publishKubeletServingCA(ctx, cs, trust(j, (&kilntls.KubeletServingCA{}).ID())); err != nil {
		return err
	}
	end := r.Progress.Start("Waiting for kube-controller-manager to publish the root CA of phase " + j.Phase + " in kube-root-ca.crt")
	err = waitRootCA(ctx, cs, trust(j, (&kilntls.RootCA{}).ID()), timeout)
	end(err)
	if err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	end = r.Progress.Start("Restarting the cluster's Deployments, DaemonSets and StatefulSets")
	n, err := restartWorkloads(ctx, cs, j.Run+"-"+j.Phase, timeout)
	end(err)
	if err != nil {
		return exitcode.With(exitcode.Install, err)
	}
	r.Log.Infof("restarted %d workloads for phase %s", n, j.Phase)
	return nil
}

// publishKubeletServingCA sets the ca.crt of KubeletServingCAConfigMap,
// when the cluster has it.
func publishKubeletServingCA(ctx context.Context, cs kubernetes.Interface, ca []byte) error {
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"ca.crt": string(ca)}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Patch(ctx, KubeletServingCAConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", metav1.NamespaceSystem, KubeletServingCAConfigMap, err)
	}
	return nil
}

// waitRootCA waits until kube-system's kube-root-ca.crt holds exactly the
// certificates of want.
func waitRootCA(ctx context.Context, cs kubernetes.Interface, want []byte, timeout time.Duration) error {
	wantSet := certSet(want)
	last := ""
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got := certSet([]byte(cm.Data["ca.crt"]))
		if !slices.Equal(got, wantSet) {
			last = fmt.Sprintf("it holds %d certificates, not the %d of this phase", len(got), len(wantSet))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("kube-system/kube-root-ca.crt: %w: %s", err, last)
	}
	return nil
}

// certSet returns the DER of every certificate in data, sorted.
func certSet(data []byte) []string {
	var out []string
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, string(b.Bytes))
		}
	}
	slices.Sort(out)
	return out
}

// workload is one Deployment, DaemonSet or StatefulSet.
type workload struct {
	kind, namespace, name string
}

func (w workload) String() string { return w.kind + " " + w.namespace + "/" + w.name }

// restartWorkloads sets RestartAnnotation to value on the pod template of
// every Deployment, DaemonSet and StatefulSet and waits until each has
// rolled out (a StatefulSet that updates OnDelete is restarted by whoever
// deletes its pods, and not waited for). It returns how many it restarted.
func restartWorkloads(ctx context.Context, cs kubernetes.Interface, value string, timeout time.Duration) (int, error) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{RestartAnnotation: value}}}}})
	if err != nil {
		return 0, err
	}
	apps := cs.AppsV1()
	var all []workload
	deps, err := apps.Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, d := range deps.Items {
		all = append(all, workload{"Deployment", d.Namespace, d.Name})
	}
	dss, err := apps.DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, d := range dss.Items {
		all = append(all, workload{"DaemonSet", d.Namespace, d.Name})
	}
	sss, err := apps.StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, s := range sss.Items {
		if s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			all = append(all, workload{"StatefulSet", s.Namespace, s.Name})
		}
	}
	for _, w := range all {
		var err error
		switch w.kind {
		case "Deployment":
			_, err = apps.Deployments(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		case "DaemonSet":
			_, err = apps.DaemonSets(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		case "StatefulSet":
			_, err = apps.StatefulSets(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("restarting %s: %w", w, err)
		}
	}
	var pending []string
	err = wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, w := range all {
			done, err := rolledOut(ctx, cs, w)
			if err != nil {
				return false, err
			}
			if !done {
				pending = append(pending, w.String())
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w: not rolled out yet: %s", err, strings.Join(pending, ", "))
	}
	return len(all), nil
}

// rolledOut reports whether w runs only pods of its current template, all
// available; one deleted meanwhile is done.
func rolledOut(ctx context.Context, cs kubernetes.Interface, w workload) (bool, error) {
	apps := cs.AppsV1()
	var err error
	done := false
	switch w.kind {
	case "Deployment":
		var d *appsv1.Deployment
		if d, err = apps.Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			st := d.Status
			done = st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want
		}
	case "DaemonSet":
		var d *appsv1.DaemonSet
		if d, err = apps.DaemonSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
			st := d.Status
			done = st.ObservedGeneration >= d.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled
		}
	case "StatefulSet":
		var s *appsv1.StatefulSet
		if s, err = apps.StatefulSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{}); err == nil {
			want := int32(1)
			if s.Spec.Replicas != nil {
				want = *s.Spec.Replicas
			}
			st := s.Status
			done = st.ObservedGeneration >= s.Generation && st.UpdatedReplicas == want && st.ReadyReplicas == want && st.CurrentRevision == st.UpdateRevision
		}
	}
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		// A transient error of the API: look again at the next poll.
		return false, nil
	}
	return done, nil
}
