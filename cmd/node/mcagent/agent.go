// Package mcagent is the machine-config agent on every node (`kiln node
// machine-config-agent`, a systemd unit): it applies the rendered config
// the controller names in its Node's kiln.dev/desired-config annotation,
// reports kiln.dev/current-config, kiln.dev/state and kiln.dev/reason on
// the Node, and checks every 30 s that the files it wrote are still
// what it wrote. A file changed by hand makes the node Degraded, naming
// the path; the agent never overwrites it silently, and applies nothing
// more until the file is put back (or the config stops naming it).
package mcagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// Config configures the agent.
type Config struct {
	// NodeName is this machine's Node.
	NodeName string
	// Paths are where it writes.
	Paths machineconfig.Paths
	// Runner runs systemctl.
	Runner Runner
	// KubeletHealthz is the kubelet's health URL, polled after the agent
	// restarted it ("": not waited for).
	KubeletHealthz string
	// Interval is how often drift is checked (and the Node re-read).
	Interval time.Duration
	// Log is the agent's log.
	Log logrus.FieldLogger
	// Orphans, when not nil, is where each pass looks for orphaned runc
	// inits in pods' cgroups, which it thaws and kills (reapOrphanInits).
	Orphans *OrphanFS
}

// Run applies and watches until ctx ends. client and dyn carry the
// node's own credentials (the kubelet's): the Node authorizer lets them
// read Nodes and patch this Node only; RBAC lets every node read
// MachineConfigs.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface, dyn dynamic.Interface) error {
	a := newApplier(cfg.Paths, cfg.Runner)
	if cfg.KubeletHealthz != "" {
		a.kubeletUp = func(ctx context.Context) error { return waitHealthy(ctx, cfg.KubeletHealthz, 2*time.Minute) }
	}
	ag := &agent{cfg: cfg, a: a, client: client, dyn: dyn}
	for {
		if err := ag.once(ctx); err != nil {
			cfg.Log.Warnf("machine config: %v", err)
		}
		if err := ag.wait(ctx); err != nil {
			return nil
		}
	}
}

// agent is the running agent.
type agent struct {
	cfg    Config
	a      *applier
	client kubernetes.Interface
	dyn    dynamic.Interface
	// release is the DesiredReleaseAnnotation last made true in full.
	release string
}

// wait returns after Interval or as soon as this Node changes; an error
// only when ctx ended.
func (ag *agent) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ag.cfg.Interval)
	defer cancel()
	w, err := ag.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", ag.cfg.NodeName).String(),
	})
	if err != nil {
		<-ctx.Done()
		return context.Cause(ctx)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil
			}
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type != watch.Modified {
				continue
			}
			n, ok := ev.Object.(*corev1.Node)
			if ok && (n.Annotations[machineconfig.DesiredConfigAnnotation] != n.Annotations[machineconfig.CurrentConfigAnnotation] ||
				n.Annotations[machineconfig.DesiredReleaseAnnotation] != ag.release) {
				return nil
			}
		}
	}
}

// reap thaws and kills the orphaned runc inits of pods (orphans.go), when
// the agent looks for them.
func (ag *agent) reap() {
	if ag.cfg.Orphans == nil {
		return
	}
	pids, err := reapOrphanInits(ag.cfg.Orphans)
	if len(pids) > 0 {
		ag.cfg.Log.Warnf("thawed and killed orphaned runc init processes %v: their creator went away while their cgroup was frozen", pids)
	}
	if err != nil {
		ag.cfg.Log.Warn(err)
	}
}

// reapFor reaps every 2 s for d.
func (ag *agent) reapFor(ctx context.Context, d time.Duration) {
	if ag.cfg.Orphans == nil {
		return
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		ag.reap()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// once brings the node one step towards its desired config and reports.
func (ag *agent) once(ctx context.Context) error {
	ag.reap()
	node, err := ag.client.CoreV1().Nodes().Get(ctx, ag.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s, err := ag.a.load()
	if err != nil {
		return ag.report(ctx, node, "", machineconfig.StateDegraded, fmt.Sprintf("state: %v", err))
	}
	// An apply cut short is finished by applying what the Node asks for now
	// (apply is idempotent, and compares with the last config applied in
	// full): the pending config may be gone since.
	desired := node.Annotations[machineconfig.DesiredConfigAnnotation]
	if desired == "" {
		desired = s.Pending
	}
	if reason := ag.syncRelease(ctx, node, s.Name); reason != "" {
		return ag.report(ctx, node, s.Name, machineconfig.StateDegraded, reason)
	}
	if drift := ag.a.drift(s); len(drift) > 0 {
		return ag.report(ctx, node, s.Name, machineconfig.StateDegraded, driftReason(drift))
	}
	if desired == "" || (desired == s.Name && s.Pending == "") {
		return ag.report(ctx, node, s.Name, machineconfig.StateDone, "")
	}
	if err := ag.report(ctx, node, s.Name, machineconfig.StateWorking, "applying "+desired); err != nil {
		return err
	}
	r, err := ag.rendered(ctx, desired)
	if err == nil {
		ag.cfg.Log.Infof("applying %s", desired)
		err = ag.a.apply(ctx, s, r)
	}
	if err != nil {
		return ag.report(ctx, node, s.Name, machineconfig.StateDegraded, fmt.Sprintf("applying %s: %v", desired, err))
	}
	ag.cfg.Log.Infof("applied %s", desired)
	return ag.report(ctx, node, s.Name, machineconfig.StateDone, "")
}

// syncRelease brings the node's components to the release its Node asks
// for (machineconfig.DesiredReleaseAnnotation), reporting Working while it
// does; it returns why it could not, "" once the node runs it. A release
// it made true and reported is checked again only after the agent
// restarts.
func (ag *agent) syncRelease(ctx context.Context, node *corev1.Node, current string) string {
	value := node.Annotations[machineconfig.DesiredReleaseAnnotation]
	if value == ag.release && node.Annotations[machineconfig.CurrentReleaseAnnotation] == value {
		// Made true by this agent and reported: not checked again (a
		// `kubelet --version` every pass) until the Node asks for more.
		return ""
	}
	want, err := machineconfig.ParseNodeRelease(value)
	if err != nil {
		return err.Error()
	}
	changed, err := ag.a.syncRelease(ctx, want, func(what string) error {
		ag.cfg.Log.Info(what)
		return ag.report(ctx, node, current, machineconfig.StateWorking, what)
	})
	if err != nil {
		return "release: " + err.Error()
	}
	if changed {
		ag.cfg.Log.Infof("the node runs %s", want)
		// The kubelet replaces the static pods now: an init it leaves
		// frozen would hold the new one back (orphans.go).
		go ag.reapFor(ctx, time.Minute)
	}
	if node.Annotations[machineconfig.CurrentReleaseAnnotation] != value {
		if err := ag.annotate(ctx, node, map[string]any{machineconfig.CurrentReleaseAnnotation: value}); err != nil {
			return "release: " + err.Error()
		}
	}
	ag.release = value
	return ""
}

// rendered reads a rendered config.
func (ag *agent) rendered(ctx context.Context, name string) (*machineconfig.Rendered, error) {
	u, err := ag.dyn.Resource(machineconfig.MachineConfigs).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var mc machineconfig.MachineConfig
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mc); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(mc.Name, machineconfig.RenderedPrefix) || mc.Labels[machineconfig.RenderedForLabel] == "" {
		return nil, fmt.Errorf("%s is not a rendered config", name)
	}
	return machineconfig.FromObject(mc)
}

// driftReason names the drifted files (at most 5).
func driftReason(d []Drift) string {
	var parts []string
	for i, x := range d {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(d)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", x.Path, x.What))
	}
	return "files changed on the node since kiln wrote them: " + strings.Join(parts, ", ") +
		"; put them back or change the MachineConfig"
}

// report sets the Node's annotations where they differ.
func (ag *agent) report(ctx context.Context, node *corev1.Node, current, state, reason string) error {
	want := map[string]string{
		machineconfig.CurrentConfigAnnotation: current,
		machineconfig.StateAnnotation:         state,
		machineconfig.ReasonAnnotation:        reason,
	}
	patch := map[string]any{}
	for k, v := range want {
		if got, ok := node.Annotations[k]; !ok || got != v {
			patch[k] = v
		}
	}
	if len(patch) == 0 {
		return nil
	}
	if state == machineconfig.StateDegraded && node.Annotations[machineconfig.ReasonAnnotation] != reason {
		ag.cfg.Log.Warnf("degraded: %s", reason)
	}
	if err := ag.annotate(ctx, node, patch); err != nil {
		return fmt.Errorf("reporting %s: %w", state, err)
	}
	return nil
}

// annotate sets annotations on node, and node to what the API returns.
func (ag *agent) annotate(ctx context.Context, node *corev1.Node, annotations map[string]any) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	n, err := ag.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotating Node %s: %w", node.Name, err)
	}
	*node = *n
	return nil
}

// waitHealthy polls url every second until it answers 200 or timeout passes.
func waitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answers %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %s: %w", timeout, last)
		case <-time.After(time.Second):
		}
	}
}
