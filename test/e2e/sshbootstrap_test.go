package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-project/kiln/assets/release"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/nodeimage"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	sshprovider "github.com/kiln-project/kiln/platforms/ssh/provider"
	tf "github.com/kiln-project/kiln/platforms/terraform"
)

// TestSSHBootstrapHost installs kiln's bootstrap Ignition config, the one
// every platform's bootstrap machine boots with, onto a plain Debian 12
// test host over SSH by applying the ssh platform's bootstrap stage
// (data/terraform/ssh) with kiln's engine and its kilnssh provider, served
// by the kiln binary: kilnssh_host runs footprint.Install (the host
// recorded, the node payload pushed and merged into /usr alone, the config
// applied by kiln-ignition.service, kubelet and containerd the payload's).
// It waits until the host's temporary control plane serves the Kubernetes
// API, bootkube applied the cluster's manifests and the machine-config
// server listens, then destroys the stage (footprint.Reset; once more by
// hand, which finds nothing to do) and wants the host's files, units,
// processes, interfaces, rules, routes and mounts as before the install.
func TestSSHBootstrapHost(t *testing.T) {
	requireMachineHost(t, "debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
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
	f := startSSHHosts(t, 11, []string{"e2eboot-0"}, nil)
	host := f.Hosts[0]

	// The install-config of the none platform: its configs are what the
	// user's machines boot. api-int resolves to the bootstrap host (the
	// user's DNS, set before the snapshot).
	dir := t.TempDir()
	subnet := host.Address[:strings.LastIndex(host.Address, ".")+1]
	cfg := fmt.Sprintf(`apiVersion: kiln.dev/v1
baseDomain: e2e.example.com
metadata:
  name: sshboot
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
	bootstrapIgn, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	apiInt := "api-int.sshboot.e2e.example.com"
	if out, err := f.Client.RunScript(ctx, host.Address, fmt.Sprintf("echo '%s %s api.sshboot.e2e.example.com' >> /etc/hosts", host.Address, apiInt)); err != nil {
		t.Fatalf("%v\n%s", err, out)
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
		Bootstrap:         &tfdata.SSHHost{Name: host.Name, Address: host.Address, IP: host.Address},
		BootstrapIgnition: string(bootstrapIgn), MasterIgnition: "{}", WorkerIgnition: "{}"}
	start := time.Now()
	if err := d.Apply(ctx, tf.StageBootstrap, vars); err != nil {
		t.Fatalf("applying the ssh platform's bootstrap stage onto %s: %v", host.Name, err)
	}
	t.Logf("MEASURE bootstrap stage applied onto the ssh host (recorded, payload pushed, merged, Ignition started) in %s", time.Since(start).Round(time.Millisecond))
	// The payload extends /usr only: /opt stays the host's, and writable
	// (Ignition writes the bootstrap manifests there). The host runs the
	// payload's kubelet and containerd.
	out, err := f.Client.RunScript(ctx, host.Address, "systemd-sysext status --json=short; kubelet --version; containerd --version")
	for _, want := range []string{
		`"hierarchy":"/usr","extensions":["` + filepath.Base(payload) + `"]`, `"hierarchy":"/opt","extensions":"none"`,
		"Kubernetes " + img.Release.Kubernetes + "\n", "containerd github.com/containerd/containerd/v2 " + strings.TrimPrefix(release.ContainerdVersion, "v") + " ",
	} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("systemd-sysext status on %s: no %s in %s (%v)", host.Name, want, out, err)
		}
	}

	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "auth", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	rc.Host = "https://" + host.Address + ":6443"
	rc.TLSClientConfig.ServerName = apiInt
	rc.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	diagnose := func() string {
		out, _ := f.Client.RunScript(context.Background(), host.Address, `systemctl --no-pager --failed
for u in kiln-ignition kiln-images containerd kubelet bootkube; do echo "== $u"; journalctl --no-pager -n 15 -u $u.service; done
ctr -n k8s.io containers ls 2>&1 | head -20`)
		return string(out)
	}
	ok := false
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			ok = true
			break
		}
		// A unit that runs once and failed will not come back: say so now.
		out, _ := f.Client.RunScript(ctx, host.Address, "systemctl is-failed kiln-ignition.service kiln-images.service containerd.service")
		if strings.Contains(string(out), "\nfailed") || strings.HasPrefix(string(out), "failed") {
			t.Fatalf("a unit of the install failed on %s (kiln-ignition, kiln-images, containerd: %q):\n%s", host.Name, out, diagnose())
		}
	}
	if !ok {
		t.Fatalf("the bootstrap host's API server did not become ready within 10m:\n%s", diagnose())
	}
	t.Logf("MEASURE bootstrap control plane on the ssh host ready %s after the install began", time.Since(start).Round(time.Second))
	// bootkube applies the cluster's manifests with the payload's kubectl;
	// the machine inventory is one of them.
	applied := false
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		if _, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kiln-machines", metav1.GetOptions{}); err == nil {
			applied = true
			break
		}
	}
	if !applied {
		t.Errorf("bootkube did not apply the manifests (no kube-system/kiln-machines) within 3m:\n%s", diagnose())
	}
	out, err = f.Client.RunScript(ctx, host.Address, `for i in $(seq 60); do
	if ss -Hltn 'sport = :22623' | grep -q .; then echo mcs listening; exit 0; fi
	sleep 2
done
exit 1`)
	if err != nil {
		t.Errorf("the machine-config server does not listen on :22623: %v\n%s\n%s", err, out, diagnose())
	}

	start = time.Now()
	if err := d.Destroy(ctx, tf.StageBootstrap, vars); err != nil {
		t.Fatalf("destroying the bootstrap stage (resetting %s): %v", host.Name, err)
	}
	t.Logf("MEASURE bootstrap stage destroyed (the ssh host reset) in %s", time.Since(start).Round(time.Millisecond))
	if err := footprint.Reset(ctx, f.Client, host.Address); err != nil {
		t.Errorf("a second reset of %s: %v", host.Name, err)
	}
	if after := snapshotHosts(t, f); after != before {
		t.Errorf("%s after the reset differs from before the install:\n%s", host.Name, lineDiff(before, after))
	}
}
