package mcagent

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/machineconfig"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// fakeNode is a node's root for the release tests: kubelet --version says
// what the kubelet file holds, and systemd-sysext refresh makes the merged
// extension's kubelet the node's.
type fakeNode struct {
	recorder
	root string
}

func (f *fakeNode) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 2 && argv[1] == "--version" {
		data, err := os.ReadFile(argv[0])
		return []byte("Kubernetes " + string(data) + "\n"), err
	}
	f.recorder.Run(ctx, strings.ReplaceAll(strings.Join(argv, " "), f.root, ""))
	if argv[0] == "systemd-sysext" {
		exts, _ := os.ReadDir(filepath.Join(f.root, nodelayout.ExtensionsDir))
		for _, e := range exts {
			data, err := os.ReadFile(filepath.Join(f.root, nodelayout.ExtensionsDir, e.Name(), nodelayout.PayloadKubelet))
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(f.root, kubeletBinary), data, 0o755); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

func write(t *testing.T, root, name, data string) {
	t.Helper()
	full := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stagePayload writes release r's payload (a kubelet and two archives)
// into dir below root.
func stagePayload(t *testing.T, root, dir string, r release.Release) {
	write(t, root, path.Join(dir, nodelayout.PayloadKubelet), r.Kubernetes)
	for _, c := range []string{"etcd", "kube-apiserver"} {
		write(t, root, path.Join(dir, nodelayout.PayloadImagesDir, c+".tar"), "archive")
	}
}

func manifest(c, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + c + "\nspec:\n  containers:\n  - name: " + c + "\n    image: " + image +
		"\n    command:\n    - " + c + "\n    - --data-dir=/var/lib/etcd\n    - --snapshot-count=10000\n"
}

func TestSyncReleaseOnTheNodeImage(t *testing.T) {
	from, to := mustLookup(t, "v1.35.4"), mustLookup(t, "v1.36.3")
	p := testPaths(t)
	run := &fakeNode{root: p.Root}
	a := newApplier(p, run)
	write(t, p.Root, kubeletBinary, from.Kubernetes)
	write(t, p.Root, nodelayout.StaticPodDir+"/etcd.yaml", manifest("etcd", from.Image(release.Etcd)))
	write(t, p.Root, nodelayout.StaticPodDir+"/kube-apiserver.yaml", manifest("kube-apiserver", from.Image(release.KubeAPIServer)))
	write(t, p.Root, nodelayout.StagedPodDir+"/kube-apiserver.yaml", manifest("kube-apiserver", from.Image(release.KubeAPIServer)))
	ctx := context.Background()
	var said []string
	progress := func(s string) error { said = append(said, s); return nil }

	// Nothing staged: the error says what is missing and nothing changes.
	want := machineconfig.NodeRelease{"etcd": to.Kubernetes}
	if _, err := a.syncRelease(ctx, want, progress); err == nil || !strings.Contains(err.Error(), "the payload of v1.36.3 is not on this node") {
		t.Fatalf("without a payload: %v", err)
	}
	stagePayload(t, p.Root, path.Join(nodelayout.ReleasesDir, to.Kubernetes), to)
	changed, err := a.syncRelease(ctx, want, progress)
	if err != nil || !changed {
		t.Fatalf("etcd: %v, %v", changed, err)
	}
	if got := read(t, p, nodelayout.StaticPodDir+"/etcd.yaml"); !strings.Contains(got, "image: "+to.Image(release.Etcd)) || !strings.Contains(got, "--snapshot-count=100\n") {
		t.Errorf("etcd's manifest after the change:\n%s", got)
	}
	if got := read(t, p, nodelayout.StaticPodDir+"/kube-apiserver.yaml"); !strings.Contains(got, from.Image(release.KubeAPIServer)) || !strings.Contains(got, "=10000") {
		t.Errorf("the API server changed with etcd:\n%s", got)
	}
	if got, want := run.take(), "ctr --namespace k8s.io images import /var/lib/kiln/releases/v1.36.3/usr/share/kiln/images/etcd.tar"; got != want {
		t.Errorf("commands:\n%s\nwant\n%s", got, want)
	}
	// Again: nothing to do, nothing run.
	if changed, err := a.syncRelease(ctx, want, progress); err != nil || changed || run.take() != "" {
		t.Errorf("a second pass changed %v (%v)", changed, err)
	}

	want = want.With("kube-apiserver", to.Kubernetes).With(machineconfig.Kubelet, to.Kubernetes)
	if _, err := a.syncRelease(ctx, want, progress); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{nodelayout.StaticPodDir, nodelayout.StagedPodDir} {
		if got := read(t, p, dir+"/kube-apiserver.yaml"); !strings.Contains(got, to.Image(release.KubeAPIServer)) {
			t.Errorf("%s/kube-apiserver.yaml:\n%s", dir, got)
		}
	}
	if got := read(t, p, kubeletBinary); got != to.Kubernetes {
		t.Errorf("the kubelet is %q", got)
	}
	wantRun := strings.Join([]string{
		"ctr --namespace k8s.io images import /var/lib/kiln/releases/v1.36.3/usr/share/kiln/images/kube-apiserver.tar",
		"ctr --namespace k8s.io images import /var/lib/kiln/releases/v1.36.3/usr/share/kiln/images/etcd.tar",
		"ctr --namespace k8s.io images import /var/lib/kiln/releases/v1.36.3/usr/share/kiln/images/kube-apiserver.tar",
		"systemctl restart kubelet.service",
	}, "\n")
	if got := run.take(); got != wantRun {
		t.Errorf("commands:\n%s\nwant\n%s", got, wantRun)
	}
	if want := []string{"bringing etcd to v1.36.3", "bringing etcd to v1.36.3", "bringing kube-apiserver to v1.36.3", "bringing kubelet to v1.36.3"}; strings.Join(said, "|") != strings.Join(want, "|") {
		t.Errorf("progress %q, want %q", said, want)
	}

	// Back (a rollback), from the payload of the release it came from.
	stagePayload(t, p.Root, path.Join(nodelayout.ReleasesDir, from.Kubernetes), from)
	if _, err := a.syncRelease(ctx, machineconfig.NodeRelease{machineconfig.Kubelet: from.Kubernetes}, progress); err != nil {
		t.Fatal(err)
	}
	if got := read(t, p, kubeletBinary); got != from.Kubernetes {
		t.Errorf("the kubelet after the rollback is %q", got)
	}
}

func TestSyncReleaseSwapsTheMergedExtension(t *testing.T) {
	from, to := mustLookup(t, "v1.35.4"), mustLookup(t, "v1.36.3")
	p := testPaths(t)
	run := &fakeNode{root: p.Root}
	a := newApplier(p, run)
	old := path.Join(nodelayout.ExtensionsDir, nodelayout.PayloadExtension(from.Kubernetes))
	stagePayload(t, p.Root, old, from)
	write(t, p.Root, kubeletBinary, from.Kubernetes)
	stagePayload(t, p.Root, path.Join(nodelayout.ReleasesDir, to.Kubernetes), to)
	ctx := context.Background()
	nop := func(string) error { return nil }
	if _, err := a.syncRelease(ctx, machineconfig.NodeRelease{machineconfig.Kubelet: to.Kubernetes}, nop); err != nil {
		t.Fatal(err)
	}
	exts, _ := a.extensions()
	if len(exts) != 1 || exts[0] != nodelayout.PayloadExtension(to.Kubernetes) {
		t.Errorf("merged extensions %q", exts)
	}
	if got := read(t, p, path.Join(nodelayout.ReleasesDir, from.Kubernetes, nodelayout.PayloadKubelet)); got != from.Kubernetes {
		t.Errorf("the old payload is not kept aside: %q", got)
	}
	if got := run.take(); !strings.HasSuffix(got, "systemd-sysext refresh\nsystemctl restart kubelet.service") {
		t.Errorf("commands:\n%s", got)
	}
	// And back: the payload kept aside is merged again.
	if _, err := a.syncRelease(ctx, machineconfig.NodeRelease{machineconfig.Kubelet: from.Kubernetes}, nop); err != nil {
		t.Fatal(err)
	}
	if exts, _ := a.extensions(); len(exts) != 1 || exts[0] != nodelayout.PayloadExtension(from.Kubernetes) || read(t, p, kubeletBinary) != from.Kubernetes {
		t.Errorf("after going back: merged %q, kubelet %q", exts, read(t, p, kubeletBinary))
	}
	if _, err := os.Stat(filepath.Join(p.Root, nodelayout.ReleasesDir, to.Kubernetes)); err != nil {
		t.Errorf("the newer payload is not kept aside: %v", err)
	}
}

func mustLookup(t *testing.T, v string) release.Release {
	t.Helper()
	r, err := release.Lookup(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
