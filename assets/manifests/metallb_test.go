package manifests

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
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
	// On a master the speaker waits for the master's API server: its init
	// container is kiln's wait, which finds the API server's manifest in
	// the static pod directory mounted where kiln looks for it.
	pod := ds.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || !slices.Equal(pod.InitContainers[0].Command, []string{nodelayout.KilnBinary, "node", "wait-api-ready"}) {
		t.Errorf("the speaker's init containers %+v, want kiln node wait-api-ready", pod.InitContainers)
	} else {
		mounts := map[string]string{}
		for _, m := range pod.InitContainers[0].VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		for _, v := range pod.Volumes {
			if v.HostPath != nil && mounts[v.Name] != "" && mounts[v.Name] != v.HostPath.Path {
				t.Errorf("volume %s: host path %s mounted at %s", v.Name, v.HostPath.Path, mounts[v.Name])
			}
		}
		if mounts["static-pods"] != nodelayout.StaticPodDir || mounts["kiln"] != nodelayout.KilnBinary {
			t.Errorf("the wait's mounts %v, want %s and %s", mounts, nodelayout.StaticPodDir, nodelayout.KilnBinary)
		}
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

// TestMetalLBAPIVIP: an ssh cluster whose apiVIP kiln keeps gets MetalLB
// without a pool for Services (no loadBalancerIPs), a pool of the VIP
// alone that no Service gets unless it asks, and the Service
// kube-system/kiln-api: the masters' API servers, announced only from a
// node where one is ready. With apiVIP a master's address, or the user's
// load balancer (apiVIPManaged: false), there is no MetalLB at all.
func TestMetalLBAPIVIP(t *testing.T) {
	const objs = "manifests/18-metallb.yaml"
	files := renderAll(t, sshConfig+"    apiVIP: 192.0.2.5\n")
	byKey := map[string]any{}
	for _, o := range decodeAll(t, objs, files[objs]) {
		byKey[key(t, o)] = o.Object
	}
	if _, ok := byKey["IPAddressPool/metallb-system/kiln"]; ok {
		t.Errorf("%s has the Services' pool kiln without loadBalancerIPs", objs)
	}
	pool, _ := byKey["IPAddressPool/metallb-system/kiln-api"].(*unstructured.Unstructured)
	if pool == nil {
		t.Fatalf("%s: no IPAddressPool kiln-api: %v", objs, byKey)
	}
	addrs, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
	auto, found, _ := unstructured.NestedBool(pool.Object, "spec", "autoAssign")
	if !slices.Equal(addrs, []string{"192.0.2.5/32"}) || !found || auto {
		t.Errorf("pool kiln-api: addresses %q, autoAssign %v (set %v); want the VIP alone, never assigned unasked", addrs, auto, found)
	}
	l2, _ := byKey["L2Advertisement/metallb-system/kiln"].(*unstructured.Unstructured)
	if p, _, _ := unstructured.NestedStringSlice(l2.Object, "spec", "ipAddressPools"); !slices.Equal(p, []string{"kiln-api"}) {
		t.Errorf("the L2Advertisement announces pools %q, want [kiln-api]", p)
	}
	svc, _ := byKey["Service/"+APIVIPNamespace+"/"+APIVIPService].(*corev1.Service)
	if svc == nil {
		t.Fatalf("%s: no Service kube-system/kiln-api", objs)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
		svc.Annotations["metallb.io/loadBalancerIPs"] != "192.0.2.5" || svc.Annotations["metallb.io/address-pool"] != "kiln-api" {
		t.Errorf("Service kiln-api: type %s, traffic policy %s, annotations %v", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy, svc.Annotations)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 6443 || svc.Spec.Ports[0].TargetPort.IntValue() != 6443 {
		t.Errorf("Service kiln-api ports %+v, want 6443 to the API servers' 6443", svc.Spec.Ports)
	}
	// The selector matches the API server's static pod, as kubelet on a
	// master runs it.
	const apiserver = "static-pods/master/kube-apiserver.yaml"
	pod, ok := decodeAll(t, apiserver, files[apiserver])[0].Object.(*corev1.Pod)
	if !ok {
		t.Fatalf("%s is not a Pod", apiserver)
	}
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("Service kiln-api selects %s=%s; the API server's pod has labels %v", k, v, pod.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Error("Service kiln-api selects every pod")
	}

	for _, cfg := range []string{"    apiVIP: 192.0.2.11\n", "    apiVIP: 192.0.2.5\n    apiVIPManaged: false\n"} {
		for p := range renderAll(t, sshConfig+cfg) {
			if strings.Contains(p, "metallb") {
				t.Errorf("%q: kiln keeps no VIP, yet %s", cfg, p)
			}
		}
	}
}
