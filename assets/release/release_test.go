package release

import (
	"strconv"
	"strings"
	"testing"
)

func TestImage(t *testing.T) {
	tests := []struct {
		c    Component
		want string
	}{
		{KubeAPIServer, "kiln.local/kube-apiserver:v1.36.3"},
		{KubeControllerManager, "kiln.local/kube-controller-manager:v1.36.3"},
		{KubeScheduler, "kiln.local/kube-scheduler:v1.36.3"},
		{KubeProxy, "kiln.local/kube-proxy:v1.36.3"},
		{Etcd, "kiln.local/etcd:v3.6.16"},
		{CoreDNS, "kiln.local/coredns:v1.15.0"},
		{Pause, "kiln.local/pause:3.10"},
		{LocalPathProvisioner, "kiln.local/local-path-provisioner:v0.0.30"},
		{MetricsServer, "kiln.local/metrics-server:v0.9.0"},
		{KubeRouter, "kiln.local/kube-router:v2.1.0"},
		{MetalLB, "kiln.local/metallb:v0.15.2"},
	}
	r := Default()
	for _, tt := range tests {
		if got := r.Image(tt.c); got != tt.want {
			t.Errorf("Image(%s) = %q, want %q", tt.c, got, tt.want)
		}
	}
	if len(r.Images()) != len(tests) {
		t.Errorf("Images() has %d entries, the test knows %d", len(r.Images()), len(tests))
	}
	if PauseImage() != r.Image(Pause) {
		t.Errorf("PauseImage() = %q, the release's is %q", PauseImage(), r.Image(Pause))
	}
}

// An older release changes the Kubernetes images' tags and nothing that is
// shared.
func TestOlderReleaseImages(t *testing.T) {
	old, err := Lookup("v1.35.4")
	if err != nil {
		t.Fatal(err)
	}
	if got := old.Image(KubeAPIServer); got != "kiln.local/kube-apiserver:v1.35.4" {
		t.Errorf("v1.35.4's API server image is %q", got)
	}
	def := Default()
	for _, c := range []Component{Pause, LocalPathProvisioner, MetricsServer, KubeRouter, MetalLB} {
		if old.Image(c) != def.Image(c) {
			t.Errorf("%s differs between releases: %s, %s", c, old.Image(c), def.Image(c))
		}
	}
}

func TestEntrypointIsNamedBinary(t *testing.T) {
	for _, s := range Default().Images() {
		if want := "/usr/local/bin/" + string(s.Component); s.Entrypoint() != want {
			t.Errorf("%s: entrypoint %s, want %s", s.Component, s.Entrypoint(), want)
		}
	}
}

func TestImagesReturnsCopies(t *testing.T) {
	a := Default().Images()
	a[0].Tag = "changed"
	a[1].Binaries[0] = "changed"
	b := Default().Images()
	if b[0].Tag == "changed" || b[1].Binaries[0] == "changed" {
		t.Fatal("Images() exposed a shared table")
	}
	rs := Releases()
	rs[0].Kubernetes = "changed"
	if Default().Kubernetes == "changed" {
		t.Fatal("Releases() exposed the package's table")
	}
}

func TestUnknownComponentPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Image of an unknown component did not panic")
		}
	}()
	Default().Image("kube-unknown")
}

func TestInfo(t *testing.T) {
	r := Default()
	info := r.Info()
	if info.Kubernetes != r.Kubernetes || info.Etcd != r.Etcd || info.CoreDNS != r.CoreDNS || info.Pause != PauseVersion ||
		info.Containerd != ContainerdVersion || info.Runc != RuncVersion {
		t.Errorf("Info() = %+v does not match the release and the constants", info)
	}
	if info.Images["etcd"] != r.Image(Etcd) || len(info.Images) != len(r.Images()) {
		t.Errorf("Info().Images = %v", info.Images)
	}
}

// Every release is well formed: staging modules match Kubernetes, versions
// are unique and newest first, and Lookup finds each with or without "v".
func TestReleases(t *testing.T) {
	rs := Releases()
	if len(rs) < 2 {
		t.Fatalf("%d releases, want at least 2", len(rs))
	}
	if rs[0] != Default() {
		t.Errorf("the default %v is not the newest %v", Default(), rs[0])
	}
	for i, r := range rs {
		if want := "v0." + strings.TrimPrefix(r.Kubernetes, "v1."); r.KubernetesStaging != want {
			t.Errorf("%s: staging version %s, want %s", r.Kubernetes, r.KubernetesStaging, want)
		}
		if r.Minor() == 0 {
			t.Errorf("%s: no minor version", r.Kubernetes)
		}
		if i > 0 && (r.Minor() > rs[i-1].Minor() || r.Minor() == rs[i-1].Minor() && patch(t, r) >= patch(t, rs[i-1])) {
			t.Errorf("%s is listed after %s: newest first", r.Kubernetes, rs[i-1].Kubernetes)
		}
		for _, v := range []string{r.Kubernetes, strings.TrimPrefix(r.Kubernetes, "v")} {
			got, err := Lookup(v)
			if err != nil || got != r {
				t.Errorf("Lookup(%q) = %v, %v", v, got, err)
			}
		}
	}
	_, err := Lookup("v1.30.0")
	if err == nil || !strings.Contains(err.Error(), "v1.36.3, v1.36.1, v1.35.4") {
		t.Errorf("Lookup of an unknown version: %v, want the versions listed", err)
	}
}

func TestWithImageAndRetag(t *testing.T) {
	older, _ := Lookup("v1.35.4")
	r, err := WithImage(Etcd, older.Image(Etcd))
	if err != nil || r.Kubernetes != older.Kubernetes {
		t.Errorf("WithImage(%s) = %s, %v; want %s", older.Image(Etcd), r.Kubernetes, err, older.Kubernetes)
	}
	if _, err := WithImage(Etcd, "kiln.local/etcd:v3.4.0"); err == nil || !strings.Contains(err.Error(), "no release kiln pins runs kiln.local/etcd:v3.4.0") {
		t.Errorf("an unpinned image: %v", err)
	}
	manifest := []byte("containers:\n- image: kiln.local/etcd:v3.5.35\n  command: [etcd]\n- image: kiln.local/etcd-other:v1\n")
	got, err := Retag(manifest, Etcd, "kiln.local/etcd:v3.6.16")
	want := "containers:\n- image: kiln.local/etcd:v3.6.16\n  command: [etcd]\n- image: kiln.local/etcd-other:v1\n"
	if err != nil || string(got) != want {
		t.Errorf("Retag:\n%s\n%v\nwant:\n%s", got, err, want)
	}
	if _, err := Retag([]byte("image: kiln.local/kube-apiserver:v1.36.3\n"), Etcd, "kiln.local/etcd:v3.6.16"); err == nil {
		t.Error("Retag of a manifest without the component's image: want an error")
	}
}

// patch is the patch number of r's Kubernetes version: 3 for v1.36.3.
func patch(t *testing.T, r Release) int {
	t.Helper()
	parts := strings.Split(r.Kubernetes, ".")
	n, err := strconv.Atoi(parts[len(parts)-1])
	if len(parts) != 3 || err != nil {
		t.Fatalf("%s: not vMAJOR.MINOR.PATCH", r.Kubernetes)
	}
	return n
}

func TestWithEtcdSnapshotCount(t *testing.T) {
	old := []byte("spec:\n  containers:\n  - command:\n    - /usr/local/bin/etcd\n    - --data-dir=/var/lib/etcd\n    - --name=m\n")
	got, err := WithEtcdSnapshotCount(old)
	want := "spec:\n  containers:\n  - command:\n    - /usr/local/bin/etcd\n    - --data-dir=/var/lib/etcd\n    - --snapshot-count=100\n    - --name=m\n"
	if err != nil || string(got) != want {
		t.Fatalf("WithEtcdSnapshotCount:\n%s(%v)\nwant:\n%s", got, err, want)
	}
	if again, err := WithEtcdSnapshotCount(got); err != nil || string(again) != want {
		t.Errorf("a manifest with the flag changed:\n%s(%v)", again, err)
	}
	older := []byte("    - --data-dir=/var/lib/etcd\n    - --snapshot-count=10000\n")
	if got, err := WithEtcdSnapshotCount(older); err != nil || string(got) != "    - --data-dir=/var/lib/etcd\n    - --snapshot-count=100\n" {
		t.Errorf("an earlier kiln's 10000:\n%s(%v)", got, err)
	}
	if _, err := WithEtcdSnapshotCount([]byte("spec: {}\n")); err == nil {
		t.Error("a manifest without --data-dir passed")
	}
}
