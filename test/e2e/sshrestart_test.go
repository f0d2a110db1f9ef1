package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
)

// nodeProcesses lists, one per line, the processes of a node that run on
// a host: none may be left once kiln stopped the node.
const nodeProcesses = `ps -e -o comm= | grep -E '^(kubelet|containerd|containerd-shim.*|etcd|kube-apiserver|kube-controller|kube-scheduler|kube-proxy|coredns|pause|kiln)$' || true`

// restartSSHCluster is `kiln stop cluster` and `kiln start cluster` on
// the ssh platform: after the stop every node host runs on with no
// process of the node left, its units disabled and kiln's record saying
// stopped; wait-for install-complete fails at once naming a stopped
// machine; rebooted while stopped, a host keeps its node stopped; the
// start brings every node back Ready, a value written before the stop is
// still there, and the Service answers across hosts again from a new
// client pod on clientNode.
func restartSSHCluster(ctx context.Context, t *testing.T, kiln, dir string, f *sshFleet, client kubernetes.Interface, nodes []sshHost, rebooted sshHost, clientNode, serverNode string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ssh-restart", Namespace: "default"}, Data: map[string]string{"value": "before the stop"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runMeasured(t, kiln, 10*time.Minute, fmt.Sprintf("stop cluster on %d ssh hosts", len(nodes)), "stop", "cluster", "--dir", dir)
	assertNodesStopped := func(when string, hosts ...sshHost) {
		t.Helper()
		for _, h := range hosts {
			st, err := footprint.State(ctx, f.Client, h.Address)
			if err != nil || st != platforms.MachineStopped {
				t.Errorf("%s: host %s's node is %q (%v), want %s", when, h.Name, st, err, platforms.MachineStopped)
			}
			out, err := f.Client.RunScript(ctx, h.Address, nodeProcesses+`
for u in kubelet.service containerd.service `+footprint.APIProxyUnit+`; do
	echo "$u $(systemctl is-active $u) $(systemctl is-enabled $u)"
done`)
			want := "kubelet.service inactive disabled\ncontainerd.service inactive disabled\n" + footprint.APIProxyUnit + " inactive disabled\n"
			if err != nil || string(out) != want {
				t.Errorf("%s: host %s has (%v):\n%s\nwant no node process and:\n%s", when, h.Name, err, out, want)
			}
		}
	}
	assertNodesStopped("after stop cluster", nodes...)

	// The waits do not trust a stopped node's last Ready.
	start := time.Now()
	out, err := runKiln(t, kiln, 3*time.Minute, "wait-for", "install-complete", "--dir", dir, "--install-timeout", "2m")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 || !strings.Contains(out, " is stopped: start the cluster again with `kiln start cluster`") {
		t.Errorf("wait-for install-complete with the cluster stopped: %v, want exit code 5 naming a stopped machine\n%s", err, lastLines(out, 20))
	}
	t.Logf("MEASURE wait-for install-complete with the ssh cluster stopped: exit in %s", time.Since(start).Round(100*time.Millisecond))

	// A host rebooted while its node is stopped keeps it stopped.
	f.reboot(ctx, t, rebooted.Name)
	if out, err := f.Client.RunScript(ctx, rebooted.Address, "timeout 120 systemctl is-system-running --wait || true"); err != nil {
		t.Errorf("host %s after its reboot: %v %s", rebooted.Name, err, out)
	}
	assertNodesStopped("after a reboot while stopped", rebooted)

	runMeasured(t, kiln, 15*time.Minute, fmt.Sprintf("start cluster on %d ssh hosts, to every node Ready", len(nodes)), "start", "cluster", "--dir", dir)
	for _, h := range nodes {
		if st, err := footprint.State(ctx, f.Client, h.Address); err != nil || st != platforms.MachineRunning {
			t.Errorf("after start cluster: host %s's node is %q (%v)", h.Name, st, err)
		}
	}
	assertNodes(ctx, t, client, nodes, "after start cluster")
	if got, err := client.CoreV1().ConfigMaps("default").Get(ctx, "ssh-restart", metav1.GetOptions{}); err != nil || got.Data["value"] != "before the stop" {
		t.Errorf("the value written before the stop: %v, %v", got, err)
	}
	assertProbeClient(ctx, t, client, "probe-client-restarted", clientNode, serverNode)
}
