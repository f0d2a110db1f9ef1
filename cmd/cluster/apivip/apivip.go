// Package apivip moves the API VIP that kiln keeps (an ssh cluster's
// apiVIP, announced by MetalLB as the address of the Service
// kube-system/kiln-api) off a master before that master's API server
// loses its etcd member, and lets it back: the VIP's counterpart of
// taking a master out of the API proxies. A master is kept out by
// Kubernetes' well-known label, which MetalLB's speakers honour, and an
// annotation of kiln's says the label is kiln's to take off.
package apivip

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/manifests"
)

// ExcludeLabel keeps a node from announcing MetalLB's addresses, the API
// VIP among them.
const ExcludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// ExcludedAnnotation marks a Node whose ExcludeLabel kiln set, so that On
// takes off kiln's label and never one the user set.
const ExcludedAnnotation = "kiln.dev/api-vip-excluded"

// NudgeAnnotation is the annotation of the VIP's Service whose value
// Nudge changes.
const NudgeAnnotation = "kiln.dev/announcer-checked"

// Defaults of Mover: the speakers choose again within seconds of a label
// change, and write their record within a second of announcing.
const (
	DefaultPoll       = time.Second
	DefaultTimeout    = time.Minute
	DefaultNudgeAfter = 5 * time.Second
)

// Mover moves the API VIP through the admin client Kube.
type Mover struct {
	Kube kubernetes.Interface
	// Poll and Timeout pace Off's wait (DefaultPoll, DefaultTimeout when
	// zero).
	Poll, Timeout time.Duration
	// NudgeAfter is how long Off waits for MetalLB's record before it
	// nudges the speakers (Nudge), and again between nudges
	// (DefaultNudgeAfter when zero).
	NudgeAfter time.Duration
	// Warn, when not nil, is told when Off goes on without MetalLB's
	// record of another master.
	Warn func(string)
}

// Off labels master out of the VIP's announcers and waits until MetalLB
// records one of others announcing it, nudging the speakers (Nudge) when
// no record does; if at the end of the wait no record names anyone, it
// warns and returns nil, as the label alone keeps master from
// announcing. A master without a Node has nothing to hand over; with no
// others there is no one to hand it to.
func (m Mover) Off(ctx context.Context, master string, others []string) error {
	others = slices.DeleteFunc(slices.Clone(others), func(n string) bool { return n == master })
	if len(others) == 0 {
		return nil
	}
	node, err := m.node(ctx, master)
	if node == nil || err != nil {
		return err
	}
	if _, set := node.Labels[ExcludeLabel]; !set {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""},"annotations":{%q:"true"}}}`, ExcludeLabel, ExcludedAnnotation)
		if _, err := m.Kube.CoreV1().Nodes().Patch(ctx, master, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("labelling Node %s out of the API VIP's announcers: %w", master, err)
		}
	}
	poll, timeout, nudgeAfter := cmp.Or(m.Poll, DefaultPoll), cmp.Or(m.Timeout, DefaultTimeout), cmp.Or(m.NudgeAfter, DefaultNudgeAfter)
	last, readErr := "nothing read yet", ""
	var recorded []string
	read := false
	nudged := time.Now()
	err = wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := Announcers(ctx, m.Kube)
		if err != nil {
			if ctx.Err() == nil { // not the wait's own end cutting a read short
				readErr = "; reading them last: " + err.Error()
			}
			return false, nil
		}
		recorded, readErr, read = nodes, "", true
		last = fmt.Sprintf("MetalLB records it announced from %v", nodes)
		if slices.ContainsFunc(nodes, func(n string) bool { return slices.Contains(others, n) }) {
			return true, nil
		}
		if time.Since(nudged) >= nudgeAfter {
			nudged = time.Now()
			if err := Nudge(ctx, m.Kube); err != nil {
				last += "; " + err.Error()
			}
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && read && !slices.Contains(recorded, master):
		// MetalLB records no announcer at all (it can lose its record
		// even when nudged): the master is labelled out, which every
		// speaker honours within seconds, and no record says it still
		// announces; kiln's clients reach the masters directly when the
		// VIP does not answer.
		if m.Warn != nil {
			m.Warn(fmt.Sprintf("MetalLB records no master announcing the API VIP after %s (%s%s): going on, as %s is labelled out of its announcers", timeout, last, readErr, master))
		}
		return nil
	}
	return fmt.Errorf("the API VIP did not move off %s to one of %v within %s: %s%s", master, others, timeout, last, readErr)
}

// On lets master announce the VIP again when Off kept it out: a label
// the user set stays, and a master without a Node has none to take off.
func (m Mover) On(ctx context.Context, master string) error {
	node, err := m.node(ctx, master)
	if node == nil || err != nil {
		return err
	}
	if _, ours := node.Annotations[ExcludedAnnotation]; !ours {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:null}}}`, ExcludeLabel, ExcludedAnnotation)
	if _, err := m.Kube.CoreV1().Nodes().Patch(ctx, master, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("letting Node %s announce the API VIP again: %w", master, err)
	}
	return nil
}

// Nudge makes MetalLB's speakers sync the VIP's Service again, by a new
// value of NudgeAnnotation, so that the speaker that announces it writes
// its record, a ServiceL2Status, anew. MetalLB v0.15.2 can lose that
// record: after a master was cut off the network and came back
// (TestSSHCluster), the VIP was announced and no record named anyone for
// minutes. A speaker writes its record when its announcement changes or
// a record of its own does; one taking over patches its predecessor's
// record into its own, which the predecessor, back and no longer
// announcing, may delete by name from a cache that still shows it as
// its own. A sync of the Service writes it again.
func Nudge(ctx context.Context, kube kubernetes.Interface) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, NudgeAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := kube.CoreV1().Services(manifests.APIVIPNamespace).Patch(ctx, manifests.APIVIPService, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("nudging MetalLB's speakers to record the API VIP's announcer again: %w", err)
	}
	return nil
}

// node returns the Node name; nil without an error when there is none
// (a master whose machine went, or whose Node was deleted).
func (m Mover) node(ctx context.Context, name string) (*corev1.Node, error) {
	node, err := m.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Node %s: %w", name, err)
	}
	return node, nil
}

// serviceL2Statuses is the part of MetalLB's ServiceL2Status list that
// kiln reads: the node that announces a Service's address.
type serviceL2Statuses struct {
	Items []struct {
		Status struct {
			Node string `json:"node"`
		} `json:"status"`
	} `json:"items"`
}

// Announcers returns the nodes that MetalLB's records name as announcing
// the API VIP (a record of a node that went away may linger beside the
// new one).
func Announcers(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	data, err := kube.Discovery().RESTClient().Get().
		AbsPath("/apis/metallb.io/v1beta1/namespaces", manifests.MetalLBNamespace, "servicel2statuses").
		Param("labelSelector", "metallb.io/service-namespace="+manifests.APIVIPNamespace+",metallb.io/service-name="+manifests.APIVIPService).
		DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var list serviceL2Statuses
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	var nodes []string
	for _, it := range list.Items {
		if it.Status.Node != "" {
			nodes = append(nodes, it.Status.Node)
		}
	}
	return nodes, nil
}
