package release

import (
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
		{Etcd, "kiln.local/etcd:v3.5.35"},
		{CoreDNS, "kiln.local/coredns:v1.15.0"},
		{Pause, "kiln.local/pause:3.10"},
		{LocalPathProvisioner, "kiln.local/local-path-provisioner:v0.0.30"},
		{MetricsServer, "kiln.local/metrics-server:v0.9.0"},
		{KubeRouter, "kiln.local/kube-router:v2.1.0"},
	}
	for _, tt := range tests {
		if got := Image(tt.c); got != tt.want {
			t.Errorf("Image(%s) = %q, want %q", tt.c, got, tt.want)
		}
	}
	if len(Images()) != len(tests) {
		t.Errorf("Images() has %d entries, the test knows %d", len(Images()), len(tests))
	}
}

func TestEntrypointIsNamedBinary(t *testing.T) {
	for _, s := range Images() {
		if want := "/usr/local/bin/" + string(s.Component); s.Entrypoint() != want {
			t.Errorf("%s: entrypoint %s, want %s", s.Component, s.Entrypoint(), want)
		}
	}
}

func TestImagesReturnsCopies(t *testing.T) {
	a := Images()
	a[0].Tag = "changed"
	a[1].Binaries[0] = "changed"
	b := Images()
	if b[0].Tag == "changed" || b[1].Binaries[0] == "changed" {
		t.Fatal("Images() exposed the package's table")
	}
}

func TestUnknownComponentPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Image of an unknown component did not panic")
		}
	}()
	Image("kube-unknown")
}

func TestCurrent(t *testing.T) {
	info := Current()
	if info.Kubernetes != KubernetesVersion || info.Etcd != EtcdVersion || info.CoreDNS != CoreDNSVersion || info.Pause != PauseVersion ||
		info.Containerd != ContainerdVersion || info.Runc != RuncVersion {
		t.Errorf("Current() = %+v does not match the constants", info)
	}
	if info.Images["etcd"] != Image(Etcd) || len(info.Images) != len(Images()) {
		t.Errorf("Current().Images = %v", info.Images)
	}
	if want := "v0." + strings.TrimPrefix(KubernetesVersion, "v1."); KubernetesStagingVersion != want {
		t.Errorf("staging version %s does not match Kubernetes %s", KubernetesStagingVersion, KubernetesVersion)
	}
}
