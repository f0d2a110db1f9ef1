package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// The MachineConfig assertMachineConfig rolls out to the worker pool.
const (
	// mcAPIVersion is the MachineConfigs' (written so, it is no
	// install-config's apiVersion to sealed_test.go).
	mcAPIVersion = machineconfig.Group + "/" + machineconfig.Version
	mcFile       = "/etc/kiln-e2e/machine-config.conf"
	mcFileData   = "rolled out by the worker pool\n"
	mcMaxPods    = 99
	mcConfigYAML = `
apiVersion: ` + mcAPIVersion + `
kind: MachineConfig
metadata:
  name: 50-e2e-worker
  labels:
    kiln.dev/pool: worker
spec:
  config:
    storage:
      files:
      - path: ` + mcFile + `
        mode: 0644
        contents: {source: "data:,rolled%20out%20by%20the%20worker%20pool%0A"}
  kubeletConfig:
    maxPods: 99
`
)

// assertMachineConfig is issue 46's rollout on a running cluster with two
// workers, while mon's prober fetches from a Service on them: every pool
// is Updated first (the nodes got the empty config at join); the worker
// pool is paused and a MachineConfig adding a file and a kubelet setting
// joins it: the pool renders it and holds its nodes; unpaused, it rolls
// out one worker at a time (never two unschedulable at once) and the
// Service answers throughout (mon's phase); the file is on the workers and
// not on the masters, and the workers' kubelets take maxPods (their
// capacity); a hand edit of the file on one worker turns it Degraded,
// naming the path, within 2 minutes, and putting the file back makes it
// Done again.
func assertMachineConfig(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, exec machineExec, mon *monitor, masters, workers []string) {
	t.Helper()
	pools := dyn.Resource(machineconfig.MachineConfigPools)
	pool := func(name string) machineconfig.MachineConfigPool { return getPool(ctx, t, dyn, name) }
	updated := func(name string, n int) func() (bool, string) { return poolUpdated(ctx, t, dyn, name, n) }
	waitFor(t, ctx, 3*time.Minute, "the master pool updated", updated(machineconfig.MasterPool, len(masters)))
	waitFor(t, ctx, 3*time.Minute, "the worker pool updated", updated(machineconfig.WorkerPool, len(workers)))
	before := pool(machineconfig.WorkerPool).Status.Configuration
	masterConfig := pool(machineconfig.MasterPool).Status.Configuration

	// Count unschedulable workers the whole time.
	var mu sync.Mutex
	unschedulable := map[string]bool{}
	most, everCordoned := 0, 0
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := client.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{LabelSelector: "node.kiln.dev/role=worker"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			if n.Spec.Unschedulable && !unschedulable[n.Name] {
				everCordoned++
			}
			unschedulable[n.Name] = n.Spec.Unschedulable
			c := 0
			for _, u := range unschedulable {
				if u {
					c++
				}
			}
			most = max(most, c)
			mu.Unlock()
		}
	}()

	setPaused := func(paused bool) {
		patch := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
		if _, err := pools.Patch(ctx, machineconfig.WorkerPool, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("pause worker pool: %v", err)
		}
	}
	setPaused(true)
	createMachineConfig(ctx, t, dyn, mcConfigYAML)
	var target string
	waitFor(t, ctx, time.Minute, "the worker pool rendering the MachineConfig", func() (bool, string) {
		target = pool(machineconfig.WorkerPool).Status.Configuration
		return target != before, target
	})
	// Paused: it holds every node at the old config.
	time.Sleep(20 * time.Second)
	if st := pool(machineconfig.WorkerPool).Status; st.UpdatedMachineCount != 0 {
		t.Errorf("paused pool: %d nodes updated to %s", st.UpdatedMachineCount, target)
	}
	for _, n := range workers {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable || node.Annotations[machineconfig.DesiredConfigAnnotation] == target {
			t.Errorf("paused pool: node %s cordoned (%t) or moving to %s", n, node.Spec.Unschedulable, target)
		}
	}

	start := time.Now()
	mon.begin("machine config rollout to the workers")
	setPaused(false)
	waitFor(t, ctx, 8*time.Minute, "the worker pool rolling out "+target, updated(machineconfig.WorkerPool, len(workers)))
	mon.end("")
	t.Logf("machine config: one file and a kubelet setting rolled out to %d workers in %s", len(workers), time.Since(start).Round(time.Second))
	mu.Lock()
	if most != 1 || everCordoned != len(workers) {
		t.Errorf("rollout: at most %d workers unschedulable at once, %d cordoned in all; want 1 and %d (one at a time, every one drained)", most, everCordoned, len(workers))
	}
	mu.Unlock()
	if got := pool(machineconfig.MasterPool).Status.Configuration; got != masterConfig {
		t.Errorf("the master pool moved from %s to %s for a worker MachineConfig", masterConfig, got)
	}

	for _, n := range workers {
		out, err := exec(ctx, n, "cat", mcFile)
		if err != nil || string(out) != mcFileData {
			t.Errorf("%s: %s = %q, %v; want %q", n, mcFile, out, err, mcFileData)
		}
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable {
			t.Errorf("%s still cordoned after the rollout", n)
		}
	}
	// The kubelet runs the new settings once the node is Done; it reports
	// its capacity in its next status update.
	for _, n := range workers {
		waitFor(t, ctx, time.Minute, n+"'s pod capacity of the MachineConfig's maxPods", func() (bool, string) {
			node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := node.Status.Capacity.Pods().Value()
			return got == mcMaxPods, fmt.Sprintf("capacity %d, want %d", got, mcMaxPods)
		})
	}
	for _, n := range masters {
		if out, err := exec(ctx, n, "test", "-e", mcFile); err == nil {
			t.Errorf("%s: a master has the worker pool's %s (%s)", n, mcFile, out)
		}
	}

	// Drift: a hand edit turns the node Degraded, naming the file.
	edited := workers[0]
	if out, err := exec(ctx, edited, "sh", "-c", "echo edited by hand >> "+mcFile); err != nil {
		t.Fatalf("edit %s on %s: %v: %s", mcFile, edited, err, out)
	}
	edit := time.Now()
	state := func(want string) func() (bool, string) {
		return func() (bool, string) {
			node, err := client.CoreV1().Nodes().Get(ctx, edited, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			a := node.Annotations
			return a[machineconfig.StateAnnotation] == want, a[machineconfig.StateAnnotation] + ": " + a[machineconfig.ReasonAnnotation]
		}
	}
	waitFor(t, ctx, 2*time.Minute, edited+" Degraded by the hand edit", state(machineconfig.StateDegraded))
	t.Logf("machine config: drift reported %s after the edit", time.Since(edit).Round(time.Second))
	node, err := client.CoreV1().Nodes().Get(ctx, edited, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reason := node.Annotations[machineconfig.ReasonAnnotation]; !strings.Contains(reason, mcFile) {
		t.Errorf("Degraded reason %q does not name %s", reason, mcFile)
	}
	if out, _ := exec(ctx, edited, "cat", mcFile); !strings.Contains(string(out), "edited by hand") {
		t.Errorf("the agent overwrote the hand edit: %q", out)
	}
	waitFor(t, ctx, time.Minute, "the worker pool reporting the degraded node", func() (bool, string) {
		st := pool(machineconfig.WorkerPool).Status
		i := slices.IndexFunc(st.Conditions, func(c metav1.Condition) bool { return c.Type == machineconfig.ConditionDegraded })
		return st.DegradedMachineCount == 1 && i >= 0 && strings.Contains(st.Conditions[i].Message, edited), fmt.Sprintf("%+v", st)
	})
	restore := fmt.Sprintf("printf '%%s\\n' '%s' > %s", strings.TrimSuffix(mcFileData, "\n"), mcFile)
	if out, err := exec(ctx, edited, "sh", "-c", restore); err != nil {
		t.Fatalf("restore %s: %v: %s", mcFile, err, out)
	}
	waitFor(t, ctx, 2*time.Minute, edited+" Done once the file is back", state(machineconfig.StateDone))
}

// The custom pool assertCustomPool makes: the workers labelled
// customPoolLabel, and a file only they get.
const (
	customPool      = "e2e-infra"
	customPoolLabel = "e2e.kiln.dev/infra"
	customFile      = "/etc/kiln-e2e/infra.conf"
	customFileData  = "infra pool\n"
	customPoolYAML  = `
apiVersion: ` + mcAPIVersion + `
kind: MachineConfigPool
metadata:
  name: ` + customPool + `
spec:
  nodeSelector:
    matchLabels: {` + customPoolLabel + `: ""}
`
	customMCYAML = `
apiVersion: ` + mcAPIVersion + `
kind: MachineConfig
metadata:
  name: 60-e2e-infra
  labels:
    kiln.dev/pool: ` + customPool + `
spec:
  config:
    storage:
      files:
      - {path: ` + customFile + `, mode: 0644, contents: {source: "data:,infra%20pool%0A"}}
`
)

// assertCustomPool runs after assertMachineConfig, while mon's prober
// fetches from a Service on the workers: a custom pool selecting the
// labelled worker takes it from the worker pool, and its MachineConfig
// reaches that worker alone, which keeps the worker pool's file (a custom
// pool inherits the worker pool's MachineConfigs); once the label, the
// MachineConfig and the pool are gone, the worker is back in the worker
// pool and its agent took the custom pool's file away.
func assertCustomPool(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, exec machineExec, mon *monitor, workers []string) {
	t.Helper()
	member, other := workers[len(workers)-1], workers[0]
	label := func(value *string) {
		v := "null"
		if value != nil {
			v = fmt.Sprintf("%q", *value)
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, customPoolLabel, v)
		if _, err := client.CoreV1().Nodes().Patch(ctx, member, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("label %s: %v", member, err)
		}
	}
	empty := ""
	start := time.Now()
	mon.begin("custom pool rollout")
	label(&empty)
	createObject(ctx, t, dyn.Resource(machineconfig.MachineConfigPools), customPoolYAML)
	createMachineConfig(ctx, t, dyn, customMCYAML)
	waitFor(t, ctx, 5*time.Minute, "the custom pool "+customPool+" rolling out to "+member, poolUpdated(ctx, t, dyn, customPool, 1))
	waitFor(t, ctx, 2*time.Minute, "the worker pool without "+member, poolUpdated(ctx, t, dyn, machineconfig.WorkerPool, len(workers)-1))
	mon.end("")
	t.Logf("MEASURE machine config: a custom pool's file rolled out to its one worker in %s", time.Since(start).Round(time.Second))
	if p := getPool(ctx, t, dyn, customPool).Status.Configuration; !strings.HasPrefix(p, "rendered-"+customPool+"-") {
		t.Errorf("the custom pool's configuration %q is not its own rendered config", p)
	}
	for path, want := range map[string]string{customFile: customFileData, mcFile: mcFileData} {
		if out, err := exec(ctx, member, "cat", path); err != nil || string(out) != want {
			t.Errorf("%s, in pool %s: %s = %q, %v; want %q", member, customPool, path, out, err, want)
		}
	}
	if out, err := exec(ctx, other, "test", "-e", customFile); err == nil {
		t.Errorf("%s, not in pool %s, has its %s (%s)", other, customPool, customFile, out)
	}

	start = time.Now()
	mon.begin("custom pool removed")
	label(nil)
	if err := dyn.Resource(machineconfig.MachineConfigs).Delete(ctx, "60-e2e-infra", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the custom pool's MachineConfig: %v", err)
	}
	if err := dyn.Resource(machineconfig.MachineConfigPools).Delete(ctx, customPool, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the custom pool: %v", err)
	}
	waitFor(t, ctx, 5*time.Minute, member+" back in the worker pool", poolUpdated(ctx, t, dyn, machineconfig.WorkerPool, len(workers)))
	mon.end("")
	t.Logf("MEASURE machine config: a worker back from a custom pool in %s", time.Since(start).Round(time.Second))
	if out, err := exec(ctx, member, "test", "-e", customFile); err == nil {
		t.Errorf("%s, back in the worker pool, keeps %s (%s)", member, customFile, out)
	}
}

// assertJoinedWithPoolConfig checks that worker, just added by kiln scale
// after assertMachineConfig, booted into the worker pool's config: the
// file and the kubelet setting are there as soon as it is a Node, its
// agent reports the pool's config, and it was never cordoned or drained
// for it.
func assertJoinedWithPoolConfig(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, exec machineExec, worker string) {
	t.Helper()
	target := getPool(ctx, t, dyn, machineconfig.WorkerPool).Status.Configuration
	if out, err := exec(ctx, worker, "cat", mcFile); err != nil || string(out) != mcFileData {
		t.Errorf("%s: %s = %q, %v; want the pool's %q from its first boot", worker, mcFile, out, err, mcFileData)
	}
	waitFor(t, ctx, time.Minute, worker+" reporting the pool's config "+target, func() (bool, string) {
		node, err := client.CoreV1().Nodes().Get(ctx, worker, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		a := node.Annotations
		return a[machineconfig.CurrentConfigAnnotation] == target && a[machineconfig.DesiredConfigAnnotation] == target && a[machineconfig.StateAnnotation] == machineconfig.StateDone,
			fmt.Sprintf("%v", a)
	})
	node, err := client.CoreV1().Nodes().Get(ctx, worker, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Capacity.Pods().Value(); got != mcMaxPods {
		t.Errorf("%s: pod capacity %d, want the pool's maxPods %d", worker, got, mcMaxPods)
	}
	if node.Spec.Unschedulable || node.Annotations[machineconfig.CordonedAnnotation] != "" {
		t.Errorf("%s was cordoned for a config it booted with", worker)
	}
}

// The MachineConfig assertHostMachineConfig rolls out to an ssh cluster's
// worker pool: it replaces a file the host has and adds one in a new
// directory, which the destroy's reset must take back.
const (
	hostMCFile     = "/etc/kiln-e2e-mc/added.conf"
	hostMCReplaced = "/etc/motd"
	hostMCYAML     = `
apiVersion: ` + mcAPIVersion + `
kind: MachineConfig
metadata:
  name: 50-e2e-host
  labels:
    kiln.dev/pool: worker
spec:
  config:
    storage:
      files:
      - {path: ` + hostMCFile + `, mode: 0600, contents: {source: "data:,added"}}
      - {path: ` + hostMCReplaced + `, mode: 0644, contents: {source: "data:,replaced%20by%20kiln"}}
`
)

// assertHostMachineConfig rolls a MachineConfig out to the worker pool of
// an ssh cluster (workers are its hosts' names) and checks the files on
// each; the caller's destroy then proves that the reset took them back.
func assertHostMachineConfig(ctx context.Context, t *testing.T, dyn dynamic.Interface, exec machineExec, workers []string) {
	t.Helper()
	waitFor(t, ctx, 3*time.Minute, "the worker pool updated", poolUpdated(ctx, t, dyn, machineconfig.WorkerPool, len(workers)))
	createMachineConfig(ctx, t, dyn, hostMCYAML)
	start := time.Now()
	// Updated at a rendered config made of 50-e2e-host: not merely at one
	// other than before, which a render of something else would be.
	waitFor(t, ctx, 5*time.Minute, "the worker pool rolling out 50-e2e-host", func() (bool, string) {
		ok, detail := poolUpdated(ctx, t, dyn, machineconfig.WorkerPool, len(workers))()
		target := getPool(ctx, t, dyn, machineconfig.WorkerPool).Status.Configuration
		return ok && renderedFrom(ctx, dyn, target, "50-e2e-host"), detail
	})
	t.Logf("MEASURE machine config: two files rolled out to %d ssh worker hosts in %s", len(workers), time.Since(start).Round(time.Second))
	for _, w := range workers {
		bad := false
		for f, want := range map[string]string{hostMCFile: "added", hostMCReplaced: "replaced by kiln"} {
			if out, err := exec(ctx, w, "cat", f); err != nil || string(out) != want {
				t.Errorf("%s: %s = %q, %v; want %q", w, f, out, err, want)
				bad = true
			}
		}
		if bad {
			// What the node and its agent say they did.
			state, _ := exec(ctx, w, "cat", "/var/lib/kiln/machine-config/state.json")
			journal, _ := exec(ctx, w, "journalctl", "--no-pager", "-n", "40", "-u", "kiln-machine-config-agent.service")
			t.Errorf("%s: pool %+v\nagent state: %s\nagent journal:\n%s", w, getPool(ctx, t, dyn, machineconfig.WorkerPool).Status, state, journal)
		}
	}
}

// renderedFrom reports whether the rendered config name was merged from
// the MachineConfig source (its kiln.dev/sources annotation).
func renderedFrom(ctx context.Context, dyn dynamic.Interface, name, source string) bool {
	if name == "" {
		return false
	}
	u, err := dyn.Resource(machineconfig.MachineConfigs).Get(ctx, name, metav1.GetOptions{})
	return err == nil && slices.Contains(strings.Split(u.GetAnnotations()[machineconfig.SourcesAnnotation], ","), source)
}

// getPool reads a MachineConfigPool (the zero pool, logged, on error).
func getPool(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string) machineconfig.MachineConfigPool {
	var p machineconfig.MachineConfigPool
	u, err := dyn.Resource(machineconfig.MachineConfigPools).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		err = fromUnstructured(u, &p)
	}
	if err != nil {
		t.Logf("pool %s: %v", name, err)
	}
	return p
}

// poolUpdated is true when the pool has n nodes, all running its config.
func poolUpdated(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string, n int) func() (bool, string) {
	return func() (bool, string) {
		p := getPool(ctx, t, dyn, name)
		st := p.Status
		return st.Configuration != "" && st.MachineCount == int32(n) && st.UpdatedMachineCount == int32(n) && st.ObservedGeneration == p.Generation,
			fmt.Sprintf("%+v", st)
	}
}

// createMachineConfig creates the MachineConfig of a YAML document.
func createMachineConfig(ctx context.Context, t *testing.T, dyn dynamic.Interface, doc string) {
	t.Helper()
	createObject(ctx, t, dyn.Resource(machineconfig.MachineConfigs), doc)
}

// createObject creates the object of a YAML document in res.
func createObject(ctx context.Context, t *testing.T, res dynamic.ResourceInterface, doc string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s: %v", obj["kind"], err)
	}
}

// adminDynamic is a dynamic client with --dir's admin kubeconfig.
func adminDynamic(t *testing.T, dir string) dynamic.Interface {
	t.Helper()
	_, rc := adminClientConfig(t, dir)
	return dynamic.NewForConfigOrDie(rc)
}

// fromUnstructured converts a custom resource into its Go type.
func fromUnstructured(u *unstructured.Unstructured, into any) error {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}
