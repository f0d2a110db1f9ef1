package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/platforms/local/nodeimage"
)

// TestSSHPayload puts the node payload (nodeimage.Image.WriteSysext) on a
// plain Debian 12 test host and checks that systemd-sysext merges it into
// /usr (and leaves /opt writable), that its kubelet, kiln, containerd, runc
// and Ignition run there, that its containerd unit starts with the
// payload's config, and that its import script reads the images where the
// payload keeps them; then that stopping
// containerd, removing its state and unmerging leaves the host as it was
// (the part of destroy's reset the payload needs). The payload goes over
// SSH (remote.Client.PushDir).
func TestSSHPayload(t *testing.T) {
	requireMachineHost(t, "debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := nodeimage.Ensure(ctx, nodeimage.Options{Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	name := nodeimage.SysextName(img.Release.Kubernetes)
	payload := filepath.Join(t.TempDir(), name)
	kiln := buildStaticKiln(t)
	start := time.Now()
	if err := img.WriteSysext(payload, kiln); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE node payload written in %s", time.Since(start).Round(time.Millisecond))
	// The import is checked with the pause image only: all of them take a
	// minute or more. The list is replaced, not written into: the payload
	// shares its files with the cached image.
	listFile := filepath.Join(payload, nodeimage.SysextImagesDir, "images.txt")
	list, err := os.ReadFile(listFile)
	if err != nil {
		t.Fatal(err)
	}
	images, _, _ := strings.Cut(string(list), "\n") // "<file> <ref>"
	if err := os.Remove(listFile); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(listFile, []byte(images+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startSSHHosts(t, 10, []string{"e2epay-0"}, nil)
	host := f.Hosts[0]
	before := snapshotHosts(t, f)

	start = time.Now()
	var sent int64
	if err := f.Client.PushDir(ctx, host.Address, payload, "/var/lib/extensions/"+name, func(n int64) { sent = n }); err != nil {
		t.Fatalf("pushing the payload to %s: %v", host.Name, err)
	}
	t.Logf("MEASURE node payload pushed over SSH: %d MB in %s", sent>>20, time.Since(start).Round(time.Millisecond))
	out, err := f.Client.RunScript(ctx, host.Address, `set -eu
systemd-sysext merge >/dev/null
systemd-sysext status --json=short
echo
kubelet --version
kiln version | head -1
containerd --version
runc --version | head -1
/usr/lib/dracut/modules.d/30ignition/ignition -version
test -x /usr/lib/cni/bridge && echo cni bridge
systemctl daemon-reload
systemctl start containerd.service
ps -o args= -C containerd
ctr --namespace k8s.io version | grep -c Version
systemctl start kiln-images.service
ctr --namespace k8s.io images ls -q | sed 's/^/image: /'
touch /opt/kiln-e2e-writable && rm /opt/kiln-e2e-writable && echo /opt writable
`)
	if err != nil {
		t.Fatalf("the payload on %s: %v\n%s", host.Name, err, out)
	}
	var wants []string
	for _, line := range strings.Split(strings.TrimSpace(images), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			wants = append(wants, "\nimage: "+f[1]+"\n")
		}
	}
	for _, want := range append(wants,
		`"hierarchy":"/usr","extensions":["`+name+`"]`, `"hierarchy":"/opt","extensions":"none"`, "/opt writable",
		"Kubernetes "+img.Release.Kubernetes, "\nkiln ", "containerd github.com/containerd/containerd/v2 ", "runc version ",
		"Ignition Debian 2.", "cni bridge", "/usr/local/bin/containerd --config "+nodeimage.SysextContainerdConfig, "\n2\n",
	) {
		if !strings.Contains(string(out), want) {
			t.Errorf("the payload on %s: no %q in:\n%s", host.Name, want, out)
		}
	}
	out, err = f.Client.RunScript(ctx, host.Address, `set -eu
systemctl stop containerd.service
systemd-sysext unmerge >/dev/null
rm -rf /var/lib/extensions /run/containerd /run/systemd/sysext
find /var/lib/containerd -mindepth 1 -delete
systemctl daemon-reload
systemctl reset-failed
`)
	if err != nil {
		t.Fatalf("removing the payload from %s: %v\n%s", host.Name, err, out)
	}
	if after := snapshotHosts(t, f); after != before {
		t.Errorf("%s after the payload was removed differs from before:\n%s", host.Name, lineDiff(before, after))
	}
}
