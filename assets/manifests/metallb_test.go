package manifests

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kiln-project/kiln/assets/release"
)

// sshConfig is an ssh cluster of a bootstrap host, one master and one
// worker; %s is the rest of platform.ssh.
const sshConfig = `apiVersion: kiln.dev/v1
metadata:
  name: metal
baseDomain: example.test
controlPlane:
  name: master
  replicas: 1
compute:
- name: worker
  replicas: 1
networking:
  machineNetwork:
  - cidr: 192.0.2.0/24
platform:
  ssh:
    hosts:
    - {name: boot, address: 192.0.2.10, role: bootstrap}
    - {name: m0, address: 192.0.2.11, role: master}
    - {name: w0, address: 192.0.2.20, role: worker}
`

// TestMetalLB: an ssh cluster with loadBalancerIPs gets upstream's CRDs,
// then MetalLB's controller and speaker from kiln's image, without the
// webhook, and a pool of exactly those addresses announced by ARP; without
// addresses, no file of MetalLB's.
func TestMetalLB(t *testing.T) {
	const crds, objs = "manifests/18-metallb-crds.yaml", "manifests/18-metallb.yaml"
	files := renderAll(t, sshConfig+"    loadBalancerIPs: [192.0.2.200-192.0.2.210, 192.0.2.224/28]\n")
	var names []string
	for _, o := range decodeAll(t, crds, files[crds]) {
		u, ok := o.Object.(*unstructured.Unstructured)
		if !ok || o.kind != "CustomResourceDefinition" {
			t.Fatalf("%s holds a %s", crds, o.kind)
		}
		names = append(names, u.GetName())
	}
	for _, want := range []string{"ipaddresspools.metallb.io", "l2advertisements.metallb.io", "servicel2statuses.metallb.io", "bgppeers.metallb.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s lacks CRD %s: %v", crds, want, names)
		}
	}
	if !strings.Contains(string(files[crds]), "MetalLB "+release.MetalLBVersion+",") {
		t.Errorf("%s is not of the pinned MetalLB %s: go generate ./assets/manifests", crds, release.MetalLBVersion)
	}
	byKey := map[string]any{}
	for _, o := range decodeAll(t, objs, files[objs]) {
		byKey[key(t, o)] = o.Object
	}
	spec := release.Default().Spec(release.MetalLB)
	dep, _ := byKey["Deployment/metallb-system/controller"].(*appsv1.Deployment)
	ds, _ := byKey["DaemonSet/metallb-system/speaker"].(*appsv1.DaemonSet)
	if dep == nil || ds == nil {
		t.Fatalf("%s: no controller Deployment or speaker DaemonSet: %v", objs, byKey)
	}
	for _, c := range []corev1.Container{dep.Spec.Template.Spec.Containers[0], ds.Spec.Template.Spec.Containers[0]} {
		bin := strings.TrimPrefix(c.Command[0], release.BinDir+"/")
		if c.Image != spec.Ref() || c.ImagePullPolicy != corev1.PullNever || !slices.Contains(spec.Binaries, bin) {
			t.Errorf("%s runs %s from %s (pull %s); the image holds %v", c.Name, c.Command[0], c.Image, c.ImagePullPolicy, spec.Binaries)
		}
	}
	wantFlags(t, "controller", dep.Spec.Template.Spec.Containers[0].Command, "--webhook-mode=disabled", "--disable-cert-rotation")
	if !ds.Spec.Template.Spec.HostNetwork || ds.Spec.Template.Spec.Containers[0].Command[0] != release.BinDir+"/metallb-speaker" {
		t.Errorf("the speaker runs %q, host network %v", ds.Spec.Template.Spec.Containers[0].Command, ds.Spec.Template.Spec.HostNetwork)
	}
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "METALLB_HOST" && e.Value != "127.0.0.1" {
			t.Errorf("the speaker's metrics listen on %q, want the host's loopback", e.Value)
		}
	}
	pool, _ := byKey["IPAddressPool/metallb-system/kiln"].(*unstructured.Unstructured)
	if pool == nil {
		t.Fatalf("%s: no IPAddressPool kiln", objs)
	}
	addrs, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
	if !slices.Equal(addrs, []string{"192.0.2.200-192.0.2.210", "192.0.2.224/28"}) {
		t.Errorf("pool addresses %q", addrs)
	}
	l2, _ := byKey["L2Advertisement/metallb-system/kiln"].(*unstructured.Unstructured)
	if l2 == nil {
		t.Fatalf("%s: no L2Advertisement kiln", objs)
	}
	if p, _, _ := unstructured.NestedStringSlice(l2.Object, "spec", "ipAddressPools"); !slices.Equal(p, []string{"kiln"}) {
		t.Errorf("the L2Advertisement announces pools %q", p)
	}
	for k := range byKey {
		if strings.Contains(k, "Webhook") {
			t.Errorf("%s holds %s: kiln's MetalLB runs without its webhook", objs, k)
		}
	}

	const secret = "manifests/19-metallb-memberlist.yaml"
	objsOf := decodeAll(t, secret, files[secret])
	if len(objsOf) != 1 {
		t.Fatalf("%s holds %d objects", secret, len(objsOf))
	}
	if s, ok := objsOf[0].Object.(*corev1.Secret); !ok || s.Namespace != "metallb-system" || s.Name != "memberlist" || len(s.Data["secretkey"]) < 22 {
		t.Errorf("%s: %+v, want Secret metallb-system/memberlist with a key of 128 bits", secret, objsOf[0].Object)
	}
	if again := renderAll(t, sshConfig+"    loadBalancerIPs: [192.0.2.200-192.0.2.210]\n"); string(again[secret]) == string(files[secret]) {
		t.Errorf("two clusters got the same memberlist key")
	}

	for p := range renderAll(t, sshConfig) {
		if strings.Contains(p, "metallb") {
			t.Errorf("no loadBalancerIPs, yet %s", p)
		}
	}
}
