package scale

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
)

// Drainer cordons and drains nodes through the Eviction API, as kubectl
// drain does: PodDisruptionBudgets are respected, DaemonSet pods and
// mirror pods are left, emptyDir data is deleted with its pod.
type Drainer struct {
	Client kubernetes.Interface
	// Timeout bounds a node's drain; DefaultDrainTimeout when zero.
	Timeout time.Duration
	// Force deletes pods no controller manages and bypasses
	// PodDisruptionBudgets (pods are deleted instead of evicted).
	Force bool
	Log   logrus.FieldLogger

	// run drains a cordoned node; drain.RunNodeDrain when nil (tests
	// replace it).
	run func(h *drain.Helper, node string) error
}

// ForceOverrides says what --force overrides in a drain.
const ForceOverrides = "--force: pods no controller manages are deleted, and pods are deleted instead of evicted, " +
	"ignoring PodDisruptionBudgets"

// Drain cordons node and evicts its pods, waiting until they are gone.
func (d *Drainer) Drain(ctx context.Context, node string) error {
	timeout := d.Timeout
	if timeout == 0 {
		timeout = DefaultDrainTimeout
	}
	h := &drain.Helper{
		Ctx:                 ctx,
		Client:              d.Client,
		Force:               d.Force,
		DisableEviction:     d.Force,
		GracePeriodSeconds:  -1,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		Timeout:             timeout,
		Out:                 logWriter{d.Log},
		ErrOut:              logWriter{d.Log},
		OnPodDeletionOrEvictionFinished: func(pod *corev1.Pod, _ bool, err error) {
			if err == nil {
				d.Log.Infof("pod %s/%s evicted from %s", pod.Namespace, pod.Name, node)
			}
		},
	}
	if err := d.cordon(ctx, h, node); err != nil {
		return err
	}
	run := d.run
	if run == nil {
		run = drain.RunNodeDrain
	}
	deadline := time.Now().Add(timeout)
	for {
		h.Timeout = time.Until(deadline)
		err := run(h, node)
		if err == nil {
			return nil
		}
		// kubectl's drain gives up at the first failed call; an API
		// server that restarts (a master's, during an upgrade) or a
		// connection the load balancer cut is worth another pass: the
		// drain lists what is left and evicts it.
		if transientAPIError(err) && ctx.Err() == nil && time.Until(deadline) > drainRetryDelay {
			d.Log.Warnf("draining %s: %v; trying again", node, err)
			select {
			case <-ctx.Done():
			case <-time.After(drainRetryDelay):
			}
			continue
		}
		err = fmt.Errorf("drain %s within %s (--force deletes unmanaged pods and ignores PodDisruptionBudgets): %w", node, timeout, err)
		switch msg := err.Error(); {
		case strings.Contains(msg, drainTimedOut):
			if held := heldByBudgets(context.WithoutCancel(ctx), d.Client, node); held != "" {
				err = fmt.Errorf("%w; %s", err, held)
			}
		case strings.Contains(msg, drainNotTerminated):
			if stuck := terminating(context.WithoutCancel(ctx), d.Client, node, time.Now()); stuck != "" {
				err = fmt.Errorf("%w; %s", err, stuck)
			}
		}
		return err
	}
}

// drainTimedOut is in the error of a drain that ran out of time, where
// a PodDisruptionBudget is the usual cause.
const drainTimedOut = "global timeout reached"

// drainNotTerminated is in the error of a drain whose evicted pods were
// not gone in time: the eviction was accepted, and the node's kubelet has
// not stopped the pod and confirmed it.
const drainNotTerminated = "to terminate"

// drainRetryDelay is the pause before a drain that met a transient API
// error tries again.
const drainRetryDelay = 2 * time.Second

// transientMarkers are in the errors of API calls that failed on their
// way (a connection cut or refused, an API server restarting or without
// its etcd for a moment), not on what they asked. kubectl's drain reports
// them with %v, so only their text is left.
var transientMarkers = [...]string{
	"unexpected EOF", "connection refused", "connection reset by peer", "broken pipe",
	"http2: client connection lost", "http2: server sent GOAWAY", "TLS handshake timeout", "i/o timeout",
	"Client.Timeout exceeded", "the server is currently unable to handle the request",
	"the server was unable to return a response in the time allotted",
	"etcdserver: leader changed", "etcdserver: request timed out",
}

// transientAPIError reports whether a drain's error is only a transient
// failure of the API: not a timeout, not a refusal (an unmanaged pod, a
// forbidden call).
func transientAPIError(err error) bool {
	msg := err.Error()
	if strings.Contains(msg, drainTimedOut) {
		return false
	}
	for _, m := range transientMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// cordonRetry is how long a cordon retries while the API does not answer:
// an API server that restarts (a single master's, during an upgrade) is
// back within it.
const cordonRetry = 2 * time.Minute

// cordon marks node unschedulable, retrying every 2 s for up to
// cordonRetry while the API fails; the error is the last one.
func (d *Drainer) cordon(ctx context.Context, h *drain.Helper, node string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, cordonRetry, true, func(ctx context.Context) (bool, error) {
		n, err := d.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			err = drain.RunCordonOrUncordon(h, n, true)
		}
		if last = err; err != nil {
			d.Log.Debugf("cordon %s: %v", node, err)
		}
		return err == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("cordon %s: %w", node, last)
	}
	return err
}

// heldByBudgets names the pods left on node that a PodDisruptionBudget
// keeps from eviction, with the budget: what blocks a drain that timed
// out. Empty when none does (or the API cannot tell).
func heldByBudgets(ctx context.Context, client kubernetes.Interface, node string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := podsOn(ctx, client, node)
	if err != nil {
		return ""
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var held []string
	for _, p := range pods {
		for _, b := range pdbs.Items {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || b.Namespace != p.Namespace || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) || b.Status.DisruptionsAllowed > 0 {
				continue
			}
			held = append(held, fmt.Sprintf("pod %s/%s is held by PodDisruptionBudget %s (%d of %d pods healthy, %d needed, 0 disruptions allowed)",
				p.Namespace, p.Name, b.Name, b.Status.CurrentHealthy, b.Status.ExpectedPods, b.Status.DesiredHealthy))
		}
	}
	return strings.Join(held, "; ")
}

// podsOn lists the pods bound to node (those a client that ignored the
// field selector returned beside them left out).
func podsOn(ctx context.Context, client kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Spec.NodeName != node }), nil
}

// terminating describes the pods on node that are being deleted, with
// how long, their containers' states, and the node's kubelet (its Ready
// condition and its lease's last renewal): whether the kubelet that must
// stop them is alive. Empty when there is none (or the API cannot tell).
func terminating(ctx context.Context, client kubernetes.Interface, node string, now time.Time) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := podsOn(ctx, client, node)
	if err != nil {
		return ""
	}
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			continue
		}
		var states []string
		for _, c := range p.Status.ContainerStatuses {
			switch st := c.State; {
			case st.Running != nil:
				states = append(states, c.Name+" running")
			case st.Terminated != nil:
				states = append(states, fmt.Sprintf("%s exited %d", c.Name, st.Terminated.ExitCode))
			case st.Waiting != nil:
				states = append(states, c.Name+" waiting ("+st.Waiting.Reason+")")
			}
		}
		out = append(out, fmt.Sprintf("pod %s/%s has been terminating for %s (%s)", p.Namespace, p.Name,
			now.Sub(p.DeletionTimestamp.Time).Round(time.Second), strings.Join(states, ", ")))
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "; ") + "; " + kubeletState(ctx, client, node, now)
}

// kubeletState says whether node's kubelet reports: its Ready condition
// and when it last renewed its lease.
func kubeletState(ctx context.Context, client kubernetes.Interface, node string, now time.Time) string {
	ready := "Ready unknown"
	if n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = fmt.Sprintf("Ready %s (%s)", c.Status, c.Reason)
			}
		}
	}
	lease := "no kubelet lease"
	if l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
		lease = fmt.Sprintf("kubelet lease renewed %s ago", now.Sub(l.Spec.RenewTime.Time).Round(time.Second))
	}
	return "node " + node + ": " + ready + ", " + lease
}

// logWriter sends what the drain helper prints to the debug log.
type logWriter struct{ log logrus.FieldLogger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Debug(string(p))
	return len(p), nil
}

var _ io.Writer = logWriter{}
