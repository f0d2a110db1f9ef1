package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kiln-project/kiln/assets/release"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/nodeimage"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	sshprovider "github.com/kiln-project/kiln/platforms/ssh/provider"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// TestSSHHandover runs the bootstrap flow on two plain Debian 12 test
// hosts, a bootstrap host and a master, with the configs of a none
// install-config (the ones every platform's machines boot with) applied
// by the ssh platform's Terraform stages, with kiln's engine and its
// kilnssh provider served by the kiln binary: kilnssh_host runs
// footprint.Install (the host recorded, the node payload pushed and
// merged into /usr alone, the config applied by kiln-ignition.service,
// kubelet and containerd the payload's). The master fetches its config
// from the bootstrap host's machine-config server, etcd grows onto it and
// bootkube hands over; then the bootstrap host is removed from the
// bootstrap stage (its host reset) and the master serves the API alone
// with its Node Ready, and again after its host rebooted; then the
// cluster stage is destroyed, a second reset
// by hand finds nothing to do, and both hosts' files, units, processes,
// interfaces, rules, routes and mounts are as before the install. The test plays the user of the none platform: its DNS is
// each host's /etc/hosts (api-int on the bootstrap host first, then the
// master), and it approves the master's certificate requests, as no
// machine inventory names the hosts.
func TestSSHHandover(t *testing.T) {
	requireMachineHost(t, "debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	img, err := nodeimage.Ensure(ctx, nodeimage.Options{Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	kiln := buildStaticKiln(t)
	payload := filepath.Join(t.TempDir(), nodeimage.SysextName(img.Release.Kubernetes))
	if err := img.WriteSysext(payload, kiln); err != nil {
		t.Fatal(err)
	}
	f := startSSHHosts(t, 12, []string{"e2ehand-boot", "e2ehand-master-0"}, nil)
	boot, master := f.Hosts[0], f.Hosts[1]

	dir := t.TempDir()
	subnet := boot.Address[:strings.LastIndex(boot.Address, ".")+1]
	cfg := fmt.Sprintf(`apiVersion: kiln.dev/v1
baseDomain: e2e.example.com
metadata:
  name: sshhand
controlPlane:
  name: master
  replicas: 1
compute:
- name: worker
  replicas: 0
networking:
  machineNetwork:
  - cidr: %s0/24
platform:
  none: {}
`, subnet)
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runKiln(t, kiln, 2*time.Minute, "create", "ignition-configs", "--dir", dir); err != nil {
		t.Fatalf("kiln create ignition-configs: %v\n%s", err, out)
	}
	ign := map[string]string{}
	for _, role := range []string{"bootstrap", "master", "worker"} {
		b, err := os.ReadFile(filepath.Join(dir, role+".ign"))
		if err != nil {
			t.Fatal(err)
		}
		ign[role] = string(b)
	}
	apiInt, api := "api-int.sshhand.e2e.example.com", "api.sshhand.e2e.example.com"
	for _, h := range f.Hosts {
		if out, err := f.Client.RunScript(ctx, h.Address, fmt.Sprintf("printf '%%s\\n' '%s %s %s' '%s %s %s' >> /etc/hosts",
			boot.Address, apiInt, api, master.Address, apiInt, api)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	before := snapshotHosts(t, f)

	engine, err := tf.EnsureEngine(ctx, tf.BuildOptions{CacheDir: e2eCacheDir(t), Log: testLogger(t), Progress: platforms.NoProgress{}})
	if err != nil {
		t.Fatal(err)
	}
	modules, err := tfdata.Platform("ssh")
	if err != nil {
		t.Fatal(err)
	}
	d := tf.NewDriver(tf.DriverOptions{Engine: engine, Dir: dir, Modules: modules, Log: testLogger(t),
		Providers: []tf.Provider{sshprovider.TerraformProvider(kiln, dir)}})
	vars := tfdata.SSHVars{SSHUser: "root", SSHIdentityFile: &f.KeyFile, SSHKnownHostsFile: f.KnownHosts, Payload: payload,
		Bootstrap:         &tfdata.SSHHost{Name: boot.Name, Address: boot.Address, IP: boot.Address},
		Masters:           []tfdata.SSHHost{{Name: master.Name, Address: master.Address, IP: master.Address}},
		BootstrapIgnition: ign["bootstrap"], MasterIgnition: ign["master"], WorkerIgnition: ign["worker"]}
	start := time.Now()
	for _, stage := range []string{tf.StageBootstrap, tf.StageCluster} {
		if err := d.Apply(ctx, stage, vars); err != nil {
			t.Fatalf("applying the ssh platform's %s stage: %v", stage, err)
		}
	}
	t.Logf("MEASURE both stages applied onto the ssh hosts in %s", time.Since(start).Round(time.Second))
	// The payload extends /usr only: /opt stays the host's, and writable
	// (Ignition writes the bootstrap manifests there). The hosts run the
	// payload's kubelet and containerd.
	for _, h := range f.Hosts {
		out, err := f.Client.RunScript(ctx, h.Address, "systemd-sysext status --json=short; kubelet --version; containerd --version")
		for _, want := range []string{
			`"hierarchy":"/usr","extensions":["` + filepath.Base(payload) + `"]`, `"hierarchy":"/opt","extensions":"none"`,
			"Kubernetes " + img.Release.Kubernetes + "\n", "containerd github.com/containerd/containerd/v2 " + strings.TrimPrefix(release.ContainerdVersion, "v") + " ",
		} {
			if err != nil || !strings.Contains(string(out), want) {
				t.Errorf("%s: no %s in %s (%v)", h.Name, want, out, err)
			}
		}
	}
	diagnose := func(h sshHost) string {
		out, _ := f.Client.RunScript(context.Background(), h.Address, `systemctl --no-pager --failed
for u in kiln-ignition kubelet bootkube kiln-etcd-member kiln-netd; do echo "== $u"; journalctl --no-pager -n 12 -u $u.service; done
ctr -n k8s.io containers ls 2>&1 | head -20`)
		return "== host " + h.Name + "\n" + string(out)
	}
	defer func() {
		if t.Failed() {
			t.Log(diagnose(boot) + diagnose(master))
		}
	}()

	// Until bootkube is done, the API is the bootstrap host's; the test
	// approves the master's certificate requests as the user of the none
	// platform does.
	bootAPI := apiClient(t, dir, boot.Address, apiInt)
	waitFor(t, ctx, 20*time.Minute, "bootkube to hand over to the master (bootkube.done on the bootstrap host)", func() (bool, string) {
		approveCSRs(ctx, t, bootAPI, master.Name)
		out, err := f.Client.RunScript(ctx, boot.Address, "test -e /opt/kiln/bootkube.done && echo done; systemctl is-active bootkube.service; journalctl --no-pager -n 3 -u bootkube.service")
		return err == nil && strings.HasPrefix(string(out), "done"), string(out)
	})
	t.Logf("MEASURE bootstrap complete on the ssh hosts %s after the install began", time.Since(start).Round(time.Second))

	// The bootstrap host goes; the master serves alone.
	vars.Bootstrap = nil
	if err := d.Apply(ctx, tf.StageBootstrap, vars); err != nil {
		t.Fatalf("destroying the bootstrap host (bootstrap stage with no bootstrap): %v", err)
	}
	masterAPI := apiClient(t, dir, master.Address, apiInt)
	waitFor(t, ctx, 10*time.Minute, "the master's Node Ready with the bootstrap host reset", func() (bool, string) {
		approveCSRs(ctx, t, masterAPI, master.Name)
		n, err := masterAPI.CoreV1().Nodes().Get(ctx, master.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(n), fmt.Sprintf("%+v", n.Status.Conditions)
	})
	t.Logf("MEASURE the master alone, its Node Ready, %s after the install began", time.Since(start).Round(time.Second))
	if body, err := masterAPI.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || string(body) != "ok" {
		t.Errorf("the master's /readyz = %q, %v", body, err)
	}

	// The master's host reboots: systemd-sysext merges the payload again
	// at boot, and the units Ignition enabled bring the node back.
	rebooted := time.Now()
	f.reboot(ctx, t, master.Name)
	waitFor(t, ctx, 10*time.Minute, "the master's Node Ready again after its host rebooted", func() (bool, string) {
		body, err := masterAPI.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			out, _ := f.Client.RunScript(ctx, master.Address, "systemd-sysext status --json=short; systemctl is-active containerd kubelet; systemctl --no-pager --failed --plain --no-legend")
			return false, fmt.Sprintf("readyz %q, %v; on the host: %s", body, err, out)
		}
		n, err := masterAPI.CoreV1().Nodes().Get(ctx, master.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// Ready as posted by the kubelet that started after the reboot.
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.Time.After(rebooted) {
				ready = true
			}
		}
		return ready, fmt.Sprintf("%+v", n.Status.Conditions)
	})
	t.Logf("MEASURE the master's host rebooted: API and Node Ready again after %s", time.Since(rebooted).Round(time.Second))

	start = time.Now()
	if err := d.Destroy(ctx, tf.StageCluster, vars); err != nil {
		t.Fatalf("destroying the cluster stage: %v", err)
	}
	t.Logf("MEASURE cluster stage destroyed (the master reset) in %s", time.Since(start).Round(time.Millisecond))
	for _, h := range f.Hosts {
		if err := footprint.Reset(ctx, f.Client, h.Address); err != nil {
			t.Errorf("a second reset of %s: %v", h.Name, err)
		}
	}
	if after := snapshotHosts(t, f); after != before {
		t.Errorf("the hosts after destroy differ from before the install:\n%s", lineDiff(before, after))
	}
}

// apiClient reaches the API server at address with the admin kubeconfig
// of dir, checking its certificate for name.
func apiClient(t *testing.T, dir, address, name string) kubernetes.Interface {
	t.Helper()
	_, rc := adminClientConfig(t, dir)
	rc.Host = "https://" + address + ":6443"
	rc.TLSClientConfig.ServerName = name
	rc.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// approveCSRs approves the pending certificate requests of node (its
// kubelet's client certificate, asked with the bootstrap token, and its
// serving certificate), as the user of the none platform does.
func approveCSRs(ctx context.Context, t *testing.T, c kubernetes.Interface, node string) {
	list, err := c.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, csr := range list.Items {
		if len(csr.Status.Conditions) > 0 {
			continue
		}
		if !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") && csr.Spec.Username != "system:node:"+node {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
			Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2ETest", Message: "approved by the e2e test, the none platform's user"})
		if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{}); err == nil {
			t.Logf("approved %s (%s, %s)", csr.Name, csr.Spec.SignerName, csr.Spec.Username)
		}
	}
}
