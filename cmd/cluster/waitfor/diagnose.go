package waitfor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-project/kiln/platforms"
)

// FailedUnits reports the failed systemd units on the cluster's running
// machines; platforms.UnitChecker provides it.
type FailedUnits func(ctx context.Context) ([]platforms.FailedUnit, error)

// unitsEvery is how often a wait asks for failed units: it runs commands
// inside every machine.
const unitsEvery = 15 * time.Second

// crashLoopRestarts is how many restarts make a container that is not
// ready crash-looping even before the kubelet says CrashLoopBackOff.
const crashLoopRestarts = 3

// maxLine is how much of a line from a machine or a pod a wait shows:
// such lines may contain anything.
const maxLine = 200

// logTimeout bounds the fetch of a crashed container's previous logs.
const logTimeout = 5 * time.Second

// diagnosis finds, during one wait, the first thing that keeps the
// cluster from coming up: a stopped machine, an API endpoint that serves
// no client, a failed unit, a crash-looping pod of kiln's, a pod of
// kiln's that does not start.
type diagnosis struct {
	w *Waiter
	// machines says whether to report stopped machines (InstallComplete
	// fails on them itself).
	machines bool
	// noPods skips the crash-looping pods: the API wait has no API to
	// list them from.
	noPods bool
	// unitsAt and unit are the last look at the failed units.
	unitsAt time.Time
	unit    string
	// lines caches each crashed container's last line by pod, container
	// and restart count: its previous logs are fetched once.
	lines map[string]string
}

func (w *Waiter) newDiagnosis(machines bool) *diagnosis {
	return &diagnosis{w: w, machines: machines, lines: map[string]string{}}
}

// wrap makes check report the first problem found, before its own
// detail, whenever it is not done.
func (d *diagnosis) wrap(check func(context.Context) (bool, string, error)) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		done, detail, err := check(ctx)
		if done || err != nil {
			return done, detail, err
		}
		if p := d.problem(ctx, d.w.now()); p != "" {
			if detail == "" {
				return false, p, nil
			}
			return false, p + "; " + detail, nil
		}
		return false, detail, nil
	}
}

// problem is the first problem found, most telling first; "" when none.
func (d *diagnosis) problem(ctx context.Context, now time.Time) string {
	if d.w.Expired != nil {
		if p := d.w.Expired(now); p != "" {
			return p
		}
	}
	if d.machines {
		if p := d.stoppedMachine(ctx); p != "" {
			return p
		}
	}
	if d.w.Endpoint != nil {
		if p := d.w.Endpoint(ctx); p != "" {
			return oneLine(p)
		}
	}
	if p := d.failedUnit(ctx, now); p != "" {
		return p
	}
	if d.noPods {
		return ""
	}
	if p := d.crashLoopingPod(ctx); p != "" {
		return p
	}
	return d.stuckPod(ctx, now)
}

// stoppedMachine names the first node machine that is stopped.
func (d *diagnosis) stoppedMachine(ctx context.Context) string {
	if d.w.Machines == nil {
		return ""
	}
	states, err := d.w.Machines(ctx)
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(states))
	for n, st := range states {
		if st == platforms.MachineStopped {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return fmt.Sprintf("machine %s is %s", names[0], platforms.MachineStopped)
}

// failedUnit names the first failed unit, asking at most every unitsEvery.
func (d *diagnosis) failedUnit(ctx context.Context, now time.Time) string {
	if d.w.Units == nil {
		return ""
	}
	if !d.unitsAt.IsZero() && now.Sub(d.unitsAt) < unitsEvery {
		return d.unit
	}
	d.unitsAt = now
	units, err := d.w.Units(ctx)
	if err != nil || len(units) == 0 {
		d.unit = ""
		return ""
	}
	sort.SliceStable(units, func(i, j int) bool {
		if units[i].Machine != units[j].Machine {
			return units[i].Machine < units[j].Machine
		}
		return units[i].Unit < units[j].Unit
	})
	u := units[0]
	d.unit = fmt.Sprintf("machine %s: unit %s failed", u.Machine, u.Unit)
	if line := oneLine(u.LastLine); line != "" {
		d.unit += ": " + line
	}
	return d.unit
}

// crashLoopingPod names the first of kiln's pods with a crash-looping
// container, with its restarts and last error line.
func (d *diagnosis) crashLoopingPod(ctx context.Context) string {
	for _, p := range d.kilnPods(ctx) {
		statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, cs := range statuses {
			if !crashLooping(cs) {
				continue
			}
			s := fmt.Sprintf("pod %s/%s crash-looping (%d restarts)", p.Namespace, p.Name, cs.RestartCount)
			if line := d.lastError(ctx, p, cs); line != "" {
				s += ": " + line
			}
			return s
		}
	}
	return ""
}

// kilnPods lists kiln's pods (kilnNamespaces), namespace by namespace,
// sorted by name; a namespace that cannot be listed is left out.
func (d *diagnosis) kilnPods(ctx context.Context) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ns := range kilnNamespaces() {
		pods, err := d.w.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
		for i := range pods.Items {
			out = append(out, &pods.Items[i])
		}
	}
	return out
}

// stuckAfter is how long a pod of kiln's may take to start its containers
// before a wait names it: images are local, so a minute is long.
const stuckAfter = time.Minute

// stuckPod names the first of kiln's pods scheduled more than stuckAfter
// ago whose containers have not started yet, with the last warning the
// kubelet or the scheduler gave about it (a volume it cannot mount, an
// image it cannot find).
func (d *diagnosis) stuckPod(ctx context.Context, now time.Time) string {
	for _, p := range d.kilnPods(ctx) {
		if !notStarted(p) || now.Sub(p.CreationTimestamp.Time) < stuckAfter {
			continue
		}
		s := fmt.Sprintf("pod %s/%s", p.Namespace, p.Name)
		if p.Spec.NodeName != "" {
			s += " on " + p.Spec.NodeName
		}
		s += fmt.Sprintf(" not started after %s", now.Sub(p.CreationTimestamp.Time).Round(time.Second))
		if w := d.lastWarning(ctx, p); w != "" {
			s += ": " + w
		}
		return s
	}
	return ""
}

// notStarted reports whether p is pending, or running with a container
// that waits to be created (not one that crashed: crashLoopingPod names
// those).
func notStarted(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodPending {
		return true
	}
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ContainerCreating" || w.Reason == "PodInitializing") {
			return true
		}
	}
	return false
}

// lastWarning is the reason and message of the latest Warning event about
// p, or "".
func (d *diagnosis) lastWarning(ctx context.Context, p *corev1.Pod) string {
	events, err := d.w.Client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var last *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != p.Name {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	return oneLine(last.Reason + ": " + last.Message)
}

// eventTime is when e last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// kilnNamespaces are where kiln's own pods run: the etcd installers and
// the CSR approver (kiln-system), the control plane, DNS, the service
// proxy and metrics-server (kube-system), the storage add-on.
func kilnNamespaces() []string {
	return []string{installerNamespace, "kube-system", storageNamespace}
}

// crashLooping reports whether the kubelet backs off restarting the
// container, or it restarted crashLoopRestarts times and is not ready.
func crashLooping(cs corev1.ContainerStatus) bool {
	if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
		return true
	}
	return cs.RestartCount >= crashLoopRestarts && !cs.Ready && cs.LastTerminationState.Terminated != nil
}

// lastError is the container's last error line: its termination message,
// else the last line of its previous logs, else its exit reason and code.
func (d *diagnosis) lastError(ctx context.Context, p *corev1.Pod, cs corev1.ContainerStatus) string {
	t := cs.LastTerminationState.Terminated
	if t != nil {
		if line := oneLine(t.Message); line != "" {
			return line
		}
	}
	key := fmt.Sprintf("%s/%s/%s/%d", p.Namespace, p.Name, cs.Name, cs.RestartCount)
	if line, ok := d.lines[key]; ok {
		return line
	}
	line := d.previousLogLine(ctx, p, cs.Name)
	if line == "" && t != nil {
		line = strings.TrimSpace(fmt.Sprintf("%s (exit code %d)", oneLine(t.Reason), t.ExitCode))
	}
	d.lines[key] = line
	return line
}

// previousLogLine is the last non-empty line of the container's previous
// run; "" when they cannot be read in logTimeout.
func (d *diagnosis) previousLogLine(ctx context.Context, p *corev1.Pod, container string) string {
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	tail := int64(5)
	data, err := d.w.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, Previous: true, TailLines: &tail,
	}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return oneLine(string(data))
}

// oneLine is the last non-empty line of s, without control characters
// and cut to maxLine: text from a pod or a machine may contain anything.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	line := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, lines[len(lines)-1])
	line = strings.TrimSpace(line)
	if r := []rune(line); len(r) > maxLine {
		line = string(r[:maxLine]) + "..."
	}
	return line
}
