package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// upgradeSSHCluster upgrades the ssh cluster in dir, created at from, to
// the default release, its nodes on the hosts nodes: planned, killed with
// SIGKILL 3 s into the first kubelet step and run again, which resumes
// and completes; a canary writes through the API all along and no write
// the API acknowledged is lost. Afterwards every kubelet, every
// control-plane pod and kube-proxy run the new release, a last plan finds
// nothing to do (every etcd member reports the new etcd), and each host
// has the new release's extension merged, the old one kept aside.
func upgradeSSHCluster(ctx context.Context, t *testing.T, kiln, dir string, f *sshFleet, client kubernetes.Interface, nodes []sshHost, from string) {
	t.Helper()
	to := release.Default()
	out, err := runKiln(t, kiln, 5*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--plan")
	if err != nil || !strings.Contains(out, "kiln will upgrade the cluster from "+from+" to "+to.Kubernetes) {
		t.Fatalf("upgrade --plan: %v\n%s", err, out)
	}
	t.Logf("the plan:\n%s", out)
	cn := startCanary(t, client, "e2e-upgrade")
	start := time.Now()
	killed, _ := signalAt(t, kiln, ": kubelet "+from+" → ", 3*time.Second, syscall.SIGKILL,
		"upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--yes")
	// The pools stay paused for the upgrade while it is under way.
	assertPoolsPaused(ctx, t, adminDynamic(t, dir), true)
	out, err = runKiln(t, kiln, 30*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--yes")
	writes, errs := cn.finish()
	if err != nil || !strings.Contains(out, "Upgrade complete: "+to.Kubernetes) {
		t.Fatalf("the resumed upgrade: %v\nthe killed run:\n%s\nthe resumed run:\n%s", err, lastLines(killed, 20), lastLines(out, 60))
	}
	if !strings.Contains(out, "Resuming ") {
		t.Errorf("the run after the kill resumes no step:\n%s", lastLines(out, 40))
	}
	assertPoolsPaused(ctx, t, adminDynamic(t, dir), false)
	t.Logf("MEASURE upgrade of ssh 1+1 %s → %s: %s including the kill and the resume; canary: %d writes, %d failed\n%s",
		from, to.Kubernetes, time.Since(start).Round(time.Second), writes, len(errs), lastLines(out, 40))
	// The one master's API server and etcd restart: writes fail while
	// they do, but none the API acknowledged is lost.
	cm, err := client.CoreV1().ConfigMaps("e2e-upgrade").Get(ctx, "canary", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the canary's ConfigMap: %v", err)
	}
	if got, _ := strconv.Atoi(cm.Data["i"]); got < cn.acked {
		t.Errorf("the canary's last acknowledged write was %d, the ConfigMap holds %d: a write was lost", cn.acked, got)
	}
	if len(errs) > 0 {
		t.Logf("the canary's failed writes (the single master's restarts):\n%s", strings.Join(errs[:min(len(errs), 20)], "\n"))
	}

	assertKubelets(ctx, t, client, to.Kubernetes)
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if want := to.Image(release.Component(p.Labels["component"])); p.Spec.Containers[0].Image != want {
			t.Errorf("%s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, want)
		}
	}
	ds, err := client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil || ds.Spec.Template.Spec.Containers[0].Image != to.Image(release.KubeProxy) {
		t.Errorf("kube-proxy after the upgrade: %v", err)
	}
	// The upgrade's last step, the certificate renewal, restarted the
	// single master's control plane: the plan refuses a cluster whose
	// control-plane pods are not Ready, and waits until they are.
	settled := time.Now()
	waitFor(t, ctx, 3*time.Minute, "a last plan to find nothing to upgrade", func() (bool, string) {
		out, err := runKiln(t, kiln, 5*time.Minute, "upgrade", "cluster", "--dir", dir, "--to", to.Kubernetes, "--plan")
		return err == nil && strings.Contains(out, "Nothing to upgrade"), fmt.Sprintf("%v: %s", err, lastLines(out, 5))
	})
	t.Logf("MEASURE the control plane Ready again after the upgrade's renewal: %s", time.Since(settled).Round(time.Second))
	for _, h := range nodes {
		got, err := f.Client.RunScript(ctx, h.Address, fmt.Sprintf("ls %s; ls %s", nodelayout.ExtensionsDir, nodelayout.ReleasesDir))
		want := []string{nodeimage.SysextName(to.Kubernetes), from}
		if fields := strings.Fields(string(got)); err != nil || !slices.Equal(fields, want) {
			t.Errorf("host %s: extensions and staged releases %q (%v), want %q", h.Name, got, err, want)
		}
	}
}

// assertBootedRelease checks that the host h, added to an upgraded
// cluster since start, booted release version (assertBootedStraight), and
// has that release's extension alone and nothing staged.
func assertBootedRelease(ctx context.Context, t *testing.T, client kubernetes.Interface, f *sshFleet, h sshHost, start time.Time, version string) {
	t.Helper()
	assertBootedStraight(ctx, t, client, start, version, 1)
	got, err := f.Client.RunScript(ctx, h.Address, fmt.Sprintf("ls %s; ls %s 2>/dev/null || true", nodelayout.ExtensionsDir, nodelayout.ReleasesDir))
	if fields := strings.Fields(string(got)); err != nil || !slices.Equal(fields, []string{nodeimage.SysextName(version)}) {
		t.Errorf("host %s: extensions and staged releases %q (%v), want %s alone", h.Name, got, err, nodeimage.SysextName(version))
	}
}

// assertPoolsPaused checks that the master and worker pools are paused by
// kiln upgrade cluster (want true), or run, with no mark of it (false).
func assertPoolsPaused(ctx context.Context, t *testing.T, dyn dynamic.Interface, want bool) {
	t.Helper()
	for _, name := range []string{machineconfig.MasterPool, machineconfig.WorkerPool} {
		p := getPool(ctx, t, dyn, name)
		by, marked := p.Annotations[machineconfig.PausedByAnnotation]
		if p.Spec.Paused != want || marked != want {
			t.Errorf("pool %s: paused %t, %s %q; want paused %t, by the upgrade only while it is under way", name, p.Spec.Paused, machineconfig.PausedByAnnotation, by, want)
		}
	}
}
