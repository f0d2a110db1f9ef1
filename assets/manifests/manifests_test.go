package manifests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/bootstraptoken"
	"github.com/kiln-project/kiln/assets/manifests/inventory"
	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/graphtest"
	"github.com/kiln-project/kiln/graph/installdir"
)

// localConfig sets its own pod and service networks, so the test sees them
// reach the manifests; three masters and one worker by default.
const localConfig = `apiVersion: kiln.dev/v1
metadata:
  name: demo
baseDomain: example.test
networking:
  clusterNetwork:
  - cidr: 10.244.0.0/16
    hostPrefix: 24
  serviceNetwork:
  - 10.96.0.0/16
platform:
  local: {}
`

// noneConfig is user-provisioned infrastructure with one master and no
// workers, on the default networks.
const noneConfig = `apiVersion: kiln.dev/v1
metadata:
  name: upi
baseDomain: example.org
controlPlane:
  name: master
  replicas: 1
compute:
- name: worker
  replicas: 0
platform:
  none: {}
`

// manifestCase is one install-config and what its manifests must say.
type manifestCase struct {
	name, config                     string
	clusterName, apiInt, platform    string
	clusterCIDR, serviceCIDR, dnsIP  string
	hostPrefix, masters, coreDNSReps string
	// addons: the storage and metrics add-ons are rendered.
	addons bool
	// machines is the inventory: "<name after the infra ID>=<last octet>",
	// in order; the machine network itself depends on the host.
	machines string
}

var manifestCases = []manifestCase{{
	name: "local", config: localConfig,
	clusterName: "demo", apiInt: "api-int.demo.example.test", platform: "local",
	clusterCIDR: "10.244.0.0/16", serviceCIDR: "10.96.0.0/16", dnsIP: "10.96.0.10",
	hostPrefix: "24", masters: "3", coreDNSReps: "2", addons: true,
	machines: "master-0=11 master-1=12 master-2=13 worker-0=20",
}, {
	name: "local without add-ons", config: strings.Replace(localConfig, "local: {}", "local: {addons: {storage: false, metrics: false}}", 1),
	clusterName: "demo", apiInt: "api-int.demo.example.test", platform: "local",
	clusterCIDR: "10.244.0.0/16", serviceCIDR: "10.96.0.0/16", dnsIP: "10.96.0.10",
	hostPrefix: "24", masters: "3", coreDNSReps: "2",
	machines: "master-0=11 master-1=12 master-2=13 worker-0=20",
}, {
	name: "none", config: noneConfig,
	clusterName: "upi", apiInt: "api-int.upi.example.org", platform: "none",
	clusterCIDR: "10.128.0.0/14", serviceCIDR: "172.30.0.0/16", dnsIP: "172.30.0.10",
	hostPrefix: "23", masters: "1", coreDNSReps: "1",
}}

// renderAll runs the real engine on an install-config and returns --dir's
// manifests and static pods: path to content.
func renderAll(t *testing.T, config string) map[string][]byte {
	t.Helper()
	s, dir := openConfig(t, config)
	if err := s.Persist(context.Background(), graph.Target{Name: "manifests", Assets: Assets()}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, bootstrapTokenPath))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %o, want 0600: it holds the token", bootstrapTokenPath, st.Mode().Perm())
	}
	files := map[string][]byte{}
	for _, sub := range []string{ManifestsDir, installdir.StaticPods} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = data
			// Every Secret's file is 0600: it holds a credential.
			if info, err := d.Info(); err == nil && bytes.Contains(data, []byte("\nkind: Secret\n")) && info.Mode().Perm() != 0o600 {
				t.Errorf("%s holds a Secret, mode %o, want 0600", rel, info.Mode().Perm())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// decoder decodes with client-go's scheme and rejects unknown and duplicate
// fields, so a misspelt field in a template fails here, not in the cluster.
var decoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// object is one decoded object and its kind.
type object struct {
	runtime.Object
	kind string
}

// decodeAll decodes every YAML document of data into typed objects.
func decodeAll(t *testing.T, file string, data []byte) []object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if blank(doc) {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			// Kinds outside client-go's scheme (APIService) are checked
			// field by field.
			u := &unstructured.Unstructured{}
			if err = sigsyaml.Unmarshal(doc, &u.Object); err == nil {
				obj, gvk = u, &schema.GroupVersionKind{Kind: u.GetKind()}
			}
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", file, err, doc)
		}
		out = append(out, object{obj, gvk.Kind})
	}
}

// blank reports whether a YAML document has only comments and blank lines.
func blank(doc []byte) bool {
	for _, l := range strings.Split(string(doc), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// key names an object as Kind/namespace/name.
func key(t *testing.T, o object) string {
	t.Helper()
	m, err := meta.Accessor(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	return o.kind + "/" + m.GetNamespace() + "/" + m.GetName()
}

// TestManifests renders every manifest and static pod for a local and a none
// install-config, decodes every object with client-go's scheme and checks
// that each file holds the objects it should, and that the values taken from
// the install-config reach the flags and fields that use them.
func TestManifests(t *testing.T) {
	for _, tc := range manifestCases {
		t.Run(tc.name, func(t *testing.T) {
			files := renderAll(t, tc.config)
			objs := map[string]runtime.Object{}
			perFile := map[string][]string{}
			for p, data := range files {
				for _, o := range decodeAll(t, p, data) {
					k := key(t, o)
					if _, dup := objs[p+":"+k]; dup {
						t.Errorf("%s: %s twice", p, k)
					}
					objs[p+":"+k] = o.Object
					perFile[p] = append(perFile[p], k)
				}
			}
			checkInventory(t, tc, perFile)
			checkObjects(t, tc, objs)
			checkMachineInventory(t, tc, objs)
			checkKubeletServingCA(t, objs, files)
			checkNoConfigMapWriters(t, objs)
			if tc.platform == "none" {
				// No inventory: kube-controller-manager approves, as kubeadm's clusters do.
				find[*rbacv1.ClusterRoleBinding](t, objs, "manifests/01-rbac-node-bootstrap.yaml", "ClusterRoleBinding//kiln:node-autoapprove-bootstrap")
			} else {
				checkNoBootstrapAutoApproval(t, objs)
			}
			if tc.addons {
				checkAddons(t, objs)
			}
			for _, role := range []string{"bootstrap", "master"} {
				checkStaticPods(t, tc, role, objs)
			}
		})
	}
}

// wantObjects is what each file holds, as Kind/namespace/name.
var wantObjects = map[string][]string{
	"manifests/00-namespaces.yaml": {"Namespace//kiln-system"},
	"manifests/01-rbac-node-bootstrap.yaml": {
		"ClusterRoleBinding//kiln:kubelet-bootstrap",
		"ClusterRoleBinding//kiln:node-autoapprove-certificate-rotation",
		"ClusterRoleBinding//kiln:apiserver-kubelet-client",
		"ClusterRole//kiln:netd",
		"ClusterRoleBinding//kiln:netd",
	},
	"manifests/02-bootstrap-token.yaml":    {"Secret/kube-system/bootstrap-token-*"},
	"manifests/03-cluster-config.yaml":     {"ConfigMap/kube-system/cluster-config"},
	"manifests/05-machines.yaml":           {"ConfigMap/kube-system/kiln-machines"},
	"manifests/06-kubelet-serving-ca.yaml": {"ConfigMap/kube-system/kiln-kubelet-serving-ca"},
	"manifests/10-kube-proxy.yaml": {
		"ServiceAccount/kube-system/kube-proxy",
		"ClusterRoleBinding//kiln:kube-proxy",
		"ConfigMap/kube-system/kube-proxy",
		"DaemonSet/kube-system/kube-proxy",
	},
	"manifests/11-coredns.yaml": {
		"ServiceAccount/kube-system/coredns",
		"ClusterRole//kiln:coredns",
		"ClusterRoleBinding//kiln:coredns",
		"ConfigMap/kube-system/coredns",
		"Deployment/kube-system/coredns",
		"Service/kube-system/kube-dns",
	},
	"manifests/12-csr-approver.yaml": {
		"ServiceAccount/kiln-system/kiln-csr-approver",
		"ClusterRole//kiln:csr-approver",
		"ClusterRoleBinding//kiln:csr-approver",
		"Role/kube-system/kiln:csr-approver",
		"RoleBinding/kube-system/kiln:csr-approver",
		"ConfigMap/kiln-system/kiln-csr-approver",
		"Deployment/kiln-system/kiln-csr-approver",
	},
	"manifests/17-machine-config.yaml": {
		"CustomResourceDefinition//machineconfigs.kiln.dev",
		"CustomResourceDefinition//machineconfigpools.kiln.dev",
		"ServiceAccount/kiln-system/kiln-machine-config-controller",
		"ClusterRole//kiln:machine-config-controller",
		"ClusterRoleBinding//kiln:machine-config-controller",
		"Role/kiln-system/kiln:machine-config-controller",
		"RoleBinding/kiln-system/kiln:machine-config-controller",
		"ClusterRole//kiln:machine-config-agent",
		"ClusterRoleBinding//kiln:machine-config-agent",
		"ConfigMap/kiln-system/kiln-machine-config-controller",
		"Deployment/kiln-system/kiln-machine-config-controller",
	},
	"manifests/15-network-policy.yaml": {
		"ServiceAccount/kube-system/kube-router",
		"ClusterRole//kiln:kube-router",
		"ClusterRoleBinding//kiln:kube-router",
		"ConfigMap/kube-system/kube-router",
		"DaemonSet/kube-system/kube-router",
	},
}

// wantAddonObjects is what the add-ons' files hold when they are on.
var wantAddonObjects = map[string][]string{
	"manifests/13-local-path-storage.yaml": {
		"Namespace//local-path-storage",
		"ServiceAccount/local-path-storage/local-path-provisioner-service-account",
		"Role/local-path-storage/local-path-provisioner-role",
		"ClusterRole//local-path-provisioner-role",
		"RoleBinding/local-path-storage/local-path-provisioner-bind",
		"ClusterRoleBinding//local-path-provisioner-bind",
		"Deployment/local-path-storage/local-path-provisioner",
		"StorageClass//standard",
		"ConfigMap/local-path-storage/local-path-config",
	},
	"manifests/14-metrics-server.yaml": {
		"ServiceAccount/kube-system/metrics-server",
		"ClusterRole//system:aggregated-metrics-reader",
		"ClusterRole//system:metrics-server",
		"RoleBinding/kube-system/metrics-server-auth-reader",
		"ClusterRoleBinding//metrics-server:system:auth-delegator",
		"ClusterRoleBinding//system:metrics-server",
		"Service/kube-system/metrics-server",
		"Deployment/kube-system/metrics-server",
		"APIService//v1beta1.metrics.k8s.io",
	},
}

// checkInventory compares the files and their objects with wantObjects and
// four static pods per role.
func checkInventory(t *testing.T, tc manifestCase, perFile map[string][]string) {
	t.Helper()
	want := map[string][]string{}
	for p, keys := range wantObjects {
		want[p] = keys
	}
	if tc.platform == "none" {
		rbac := "manifests/01-rbac-node-bootstrap.yaml"
		want[rbac] = slices.Insert(slices.Clone(want[rbac]), 2, "ClusterRoleBinding//kiln:node-autoapprove-bootstrap")
	}
	if tc.addons {
		for p, keys := range wantAddonObjects {
			want[p] = keys
		}
	}
	for _, role := range []string{"bootstrap", "master"} {
		for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			want[path.Join(installdir.StaticPods, role, c+".yaml")] = []string{"Pod/kube-system/" + c}
		}
	}
	for p, keys := range want {
		got := perFile[p]
		if len(got) != len(keys) {
			t.Errorf("%s holds %q, want %q", p, got, keys)
			continue
		}
		for i := range keys {
			if ok, _ := path.Match(keys[i], got[i]); !ok {
				t.Errorf("%s: object %d is %s, want %s", p, i, got[i], keys[i])
			}
		}
	}
	for p := range perFile {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected file %s", p)
		}
	}
}

// find returns the object of kind T in file p named name.
func find[T runtime.Object](t *testing.T, objs map[string]runtime.Object, p, k string) T {
	t.Helper()
	o, ok := objs[p+":"+k].(T)
	if !ok {
		var zero T
		t.Fatalf("%s: no %s of type %T", p, k, zero)
	}
	return o
}

// checkObjects checks the cluster objects' fields that come from the
// install-config or from other assets.
func checkObjects(t *testing.T, tc manifestCase, objs map[string]runtime.Object) {
	t.Helper()
	cc := find[*corev1.ConfigMap](t, objs, "manifests/03-cluster-config.yaml", "ConfigMap/kube-system/cluster-config")
	for field, want := range map[string]string{
		"clusterName": tc.clusterName, "platform": tc.platform, "networkType": "KilnBridge",
		"clusterNetwork": tc.clusterCIDR, "hostPrefix": tc.hostPrefix, "serviceNetwork": tc.serviceCIDR,
		"dnsServiceIP": tc.dnsIP, "controlPlaneReplicas": tc.masters,
		"kubernetesVersion": release.Default().Kubernetes,
	} {
		if got := cc.Data[field]; got != want {
			t.Errorf("cluster-config %s = %q, want %q", field, got, want)
		}
	}
	if id := cc.Data["infraID"]; !strings.HasPrefix(id, tc.clusterName+"-") {
		t.Errorf("cluster-config infraID %q does not start with %q", id, tc.clusterName+"-")
	}

	for k, o := range objs {
		if s, ok := o.(*corev1.Secret); ok && strings.Contains(k, "bootstrap-token-") {
			if s.Type != bootstraptoken.SecretType || len(s.Data["token-secret"]) == 0 {
				t.Errorf("bootstrap token Secret: type %q, token-secret %d bytes", s.Type, len(s.Data["token-secret"]))
			}
		}
	}
	// No component reads a kubeadmin password hash (there is no OAuth
	// server), so no manifest carries one.
	for k := range objs {
		if strings.Contains(k, "kubeadmin") {
			t.Errorf("manifest object %s: kiln no longer makes a kubeadmin credential", k)
		}
	}

	binding := find[*rbacv1.ClusterRoleBinding](t, objs, "manifests/01-rbac-node-bootstrap.yaml", "ClusterRoleBinding//kiln:apiserver-kubelet-client")
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != tls.KubeletAPIGroup {
		t.Errorf("apiserver-kubelet-client subjects %+v, want group %s", binding.Subjects, tls.KubeletAPIGroup)
	}

	proxyCM := find[*corev1.ConfigMap](t, objs, "manifests/10-kube-proxy.yaml", "ConfigMap/kube-system/kube-proxy")
	if !strings.Contains(proxyCM.Data["config.yaml"], "clusterCIDR: "+tc.clusterCIDR+"\n") {
		t.Errorf("kube-proxy config lacks clusterCIDR %s:\n%s", tc.clusterCIDR, proxyCM.Data["config.yaml"])
	}
	if !strings.Contains(proxyCM.Data["kubeconfig"], "server: https://"+tc.apiInt+":6443\n") {
		t.Errorf("kube-proxy kubeconfig does not point at %s:\n%s", tc.apiInt, proxyCM.Data["kubeconfig"])
	}
	ds := find[*appsv1.DaemonSet](t, objs, "manifests/10-kube-proxy.yaml", "DaemonSet/kube-system/kube-proxy")
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != release.Default().Image(release.KubeProxy) {
		t.Errorf("kube-proxy image %s, want %s", img, release.Default().Image(release.KubeProxy))
	}

	checkNetworkPolicyController(t, tc, objs)

	dns := find[*corev1.Service](t, objs, "manifests/11-coredns.yaml", "Service/kube-system/kube-dns")
	if dns.Spec.ClusterIP != tc.dnsIP {
		t.Errorf("kube-dns clusterIP %s, want %s", dns.Spec.ClusterIP, tc.dnsIP)
	}
	dep := find[*appsv1.Deployment](t, objs, "manifests/11-coredns.yaml", "Deployment/kube-system/coredns")
	if r := dep.Spec.Replicas; r == nil || strconv.Itoa(int(*r)) != tc.coreDNSReps {
		t.Errorf("coredns replicas %s, want %s", fmtReplicas(r), tc.coreDNSReps)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != release.Default().Image(release.CoreDNS) {
		t.Errorf("coredns image %s, want %s", img, release.Default().Image(release.CoreDNS))
	}
	corefile := find[*corev1.ConfigMap](t, objs, "manifests/11-coredns.yaml", "ConfigMap/kube-system/coredns").Data["Corefile"]
	if !strings.Contains(corefile, "kubernetes "+ClusterDNSDomain+" ") {
		t.Errorf("Corefile does not serve %s:\n%s", ClusterDNSDomain, corefile)
	}

	approverCM := find[*corev1.ConfigMap](t, objs, "manifests/12-csr-approver.yaml", "ConfigMap/kiln-system/kiln-csr-approver")
	if !strings.Contains(approverCM.Data["kubeconfig"], "server: https://"+tc.apiInt+":6443\n") {
		t.Errorf("csr-approver kubeconfig does not point at %s:\n%s", tc.apiInt, approverCM.Data["kubeconfig"])
	}
	approver := find[*appsv1.Deployment](t, objs, "manifests/12-csr-approver.yaml", "Deployment/kiln-system/kiln-csr-approver").Spec.Template.Spec
	if c := approver.Containers[0]; c.Image != release.Default().Image(release.Pause) ||
		strings.Join(c.Command[:3], " ") != "/usr/local/bin/kiln node csr-approver" || approver.ServiceAccountName != "kiln-csr-approver" {
		t.Errorf("csr-approver runs %s %q as %q, want kiln node csr-approver in the pause image as kiln-csr-approver",
			c.Image, c.Command, approver.ServiceAccountName)
	}
}

// checkStaticPods checks one role's control plane pods.
func checkStaticPods(t *testing.T, tc manifestCase, role string, objs map[string]runtime.Object) {
	t.Helper()
	images := map[string]string{
		"etcd":                    release.Default().Image(release.Etcd),
		"kube-apiserver":          release.Default().Image(release.KubeAPIServer),
		"kube-controller-manager": release.Default().Image(release.KubeControllerManager),
		"kube-scheduler":          release.Default().Image(release.KubeScheduler),
	}
	pods := map[string]*corev1.Pod{}
	for name, image := range images {
		p := find[*corev1.Pod](t, objs, path.Join(installdir.StaticPods, role, name+".yaml"), "Pod/kube-system/"+name)
		pods[name] = p
		if !p.Spec.HostNetwork || p.Spec.PriorityClassName != "system-node-critical" || len(p.Spec.Containers) != 1 {
			t.Errorf("%s/%s: hostNetwork %v, priority class %q, %d containers; want a host-network, node-critical pod with one container",
				role, name, p.Spec.HostNetwork, p.Spec.PriorityClassName, len(p.Spec.Containers))
			continue
		}
		c := p.Spec.Containers[0]
		if c.Image != image || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s/%s: image %s pull %s, want %s pull Never", role, name, c.Image, c.ImagePullPolicy, image)
		}
		if p.Labels["component"] != name {
			t.Errorf("%s/%s: component label %q", role, name, p.Labels["component"])
		}
	}

	api := pods["kube-apiserver"].Spec.Containers[0]
	wantFlags(t, role+"/kube-apiserver", api.Command,
		"--advertise-address=$(NODE_IP)",
		"--service-cluster-ip-range="+tc.serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc."+ClusterDNSDomain,
		"--secure-port=6443",
		"--etcd-servers=https://127.0.0.1:2379",
		"--authorization-mode=Node,RBAC",
		"--kubelet-certificate-authority=/etc/kubernetes/pki/kubelet-serving-ca.crt",
	)
	if cn := flagValue(api.Command, "--requestheader-allowed-names"); cn == "" {
		t.Errorf("%s/kube-apiserver: no front-proxy client CN in --requestheader-allowed-names", role)
	}
	if len(api.Env) != 1 || api.Env[0].Name != "NODE_IP" || api.Env[0].ValueFrom == nil ||
		api.Env[0].ValueFrom.FieldRef == nil || api.Env[0].ValueFrom.FieldRef.FieldPath != "status.hostIP" {
		t.Errorf("%s/kube-apiserver: NODE_IP does not come from status.hostIP: %+v", role, api.Env)
	}

	wantFlags(t, role+"/kube-controller-manager", pods["kube-controller-manager"].Spec.Containers[0].Command,
		"--cluster-cidr="+tc.clusterCIDR,
		"--node-cidr-mask-size="+tc.hostPrefix,
		"--service-cluster-ip-range="+tc.serviceCIDR,
		"--allocate-node-cidrs=true",
		// kube-controller-manager signs from its own copies of the CAs, which
		// `kiln certs rotate-ca` can replace while trust holds old and new.
		"--cluster-signing-kubelet-serving-cert-file=/etc/kubernetes/pki/signing-kubelet-serving-ca.crt",
		"--cluster-signing-kubelet-serving-key-file=/etc/kubernetes/pki/signing-kubelet-serving-ca.key",
		"--cluster-signing-kubelet-client-cert-file=/etc/kubernetes/pki/signing-ca.crt",
		"--cluster-signing-kube-apiserver-client-cert-file=/etc/kubernetes/pki/signing-ca.crt",
		"--root-ca-file=/etc/kubernetes/pki/ca.crt",
	)

	etcd := pods["etcd"].Spec.Containers[0].Command
	if role == "bootstrap" {
		wantFlags(t, "bootstrap/etcd", etcd,
			"--initial-cluster=$(NODE_NAME)=https://$(NODE_IP):2380", "--initial-cluster-state=new")
	} else {
		wantFlags(t, "master/etcd", etcd,
			"--initial-cluster="+EtcdInitialClusterMarker, "--initial-cluster-state=existing")
	}
}

// fmtReplicas prints a replica count that may be unset.
func fmtReplicas(r *int32) string {
	if r == nil {
		return "unset"
	}
	return strconv.Itoa(int(*r))
}

// wantFlags reports every flag of want missing from argv.
func wantFlags(t *testing.T, what string, argv []string, want ...string) {
	t.Helper()
	for _, f := range want {
		if !slices.Contains(argv, f) {
			t.Errorf("%s lacks %s in %q", what, f, argv)
		}
	}
}

// flagValue returns the value of --name=value in argv.
func flagValue(argv []string, name string) string {
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestLoad checks how the assets read files the user edited or deleted:
// the edited content is used, a set with no file left is not found, a set
// missing one of its required static pods names it (issue 11, D6/D7), an
// edit that is no Pod is refused naming the file, and the token Secret stays
// 0600 whatever the mode on disk.
func TestLoad(t *testing.T) {
	pod := func(name string) []byte {
		return []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: c\n    image: i\n")
	}
	dir := graphtest.Fetcher{}
	for _, tmpl := range staticPodTemplates {
		name := strings.TrimSuffix(path.Base(tmpl), ".yaml")
		dir["static-pods/master/"+name+".yaml"] = pod(name)
	}
	dir["static-pods/master/etcd.yaml"] = pod("edited")
	master := &MasterStaticPods{}
	found, err := master.Load(dir)
	if err != nil || !found {
		t.Fatalf("Load: found %v, %v", found, err)
	}
	if data, ok := master.File("etcd.yaml"); !ok || string(data) != string(pod("edited")) {
		t.Errorf("File(etcd.yaml) = %q, %v", data, ok)
	}
	delete(dir, "static-pods/master/kube-scheduler.yaml")
	var missing *MissingFileError
	if _, err := (&MasterStaticPods{}).Load(dir); !errors.As(err, &missing) || missing.Path != "static-pods/master/kube-scheduler.yaml" {
		t.Errorf("Load without kube-scheduler.yaml: %v, want a MissingFileError naming it", err)
	}
	dir["static-pods/master/kube-scheduler.yaml"] = []byte("edited")
	var fe *FileError
	if _, err := (&MasterStaticPods{}).Load(dir); !errors.As(err, &fe) || fe.Path != "static-pods/master/kube-scheduler.yaml" {
		t.Errorf("Load of a static pod that is no Pod: %v, want a FileError naming it", err)
	}
	if found, err := (&BootstrapStaticPods{}).Load(dir); found || err != nil {
		t.Errorf("bootstrap static pods found %v, %v in a --dir with only a master's files", found, err)
	}
	tok := &BootstrapTokenSecret{}
	found, err = tok.Load(graphtest.Fetcher{bootstrapTokenPath: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: t\n  namespace: kube-system\n")})
	if err != nil || !found {
		t.Fatalf("token Load: found %v, %v", found, err)
	}
	if m := tok.Files()[0].Mode; m != 0o600 {
		t.Errorf("loaded token Secret mode %o, want 0600", m)
	}
}

// checkAddons checks the default StorageClass and metrics-server: the
// images built into the node image, the helper program instead of a shell,
// the volume directory, and kubelet TLS verified against the cluster CA.
func checkAddons(t *testing.T, objs map[string]runtime.Object) {
	t.Helper()
	const lpp, ms = "manifests/13-local-path-storage.yaml", "manifests/14-metrics-server.yaml"
	sc := find[*storagev1.StorageClass](t, objs, lpp, "StorageClass//standard")
	if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || sc.Provisioner != "rancher.io/local-path" ||
		sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("StorageClass standard: %+v; want the default class of rancher.io/local-path, Delete, WaitForFirstConsumer", sc)
	}
	lppImage := release.Default().Image(release.LocalPathProvisioner)
	dep := find[*appsv1.Deployment](t, objs, lpp, "Deployment/local-path-storage/local-path-provisioner").Spec.Template.Spec
	if c := dep.Containers[0]; c.Image != lppImage || c.ImagePullPolicy != corev1.PullNever || c.Command[0] != release.Default().Spec(release.LocalPathProvisioner).Entrypoint() {
		t.Errorf("local-path-provisioner runs %s %q (pull %s)", c.Image, c.Command, c.ImagePullPolicy)
	}
	cm := find[*corev1.ConfigMap](t, objs, lpp, "ConfigMap/local-path-storage/local-path-config")
	var cfg struct {
		NodePathMap []struct {
			Node  string   `json:"node"`
			Paths []string `json:"paths"`
		} `json:"nodePathMap"`
		SetupCommand    string `json:"setupCommand"`
		TeardownCommand string `json:"teardownCommand"`
	}
	if err := sigsyaml.UnmarshalStrict([]byte(cm.Data["config.json"]), &cfg); err != nil {
		t.Fatalf("local-path config.json: %v", err)
	}
	helper := release.BinDir + "/local-path-helper"
	if !slices.Contains(release.Default().Spec(release.LocalPathProvisioner).Binaries, "local-path-helper") {
		t.Errorf("the local-path-provisioner image has no local-path-helper")
	}
	if cfg.SetupCommand != helper || cfg.TeardownCommand != helper || len(cfg.NodePathMap) != 1 ||
		cfg.NodePathMap[0].Node != "DEFAULT_PATH_FOR_NON_LISTED_NODES" || !slices.Equal(cfg.NodePathMap[0].Paths, []string{"/var/lib/kiln/local-path"}) {
		t.Errorf("local-path config.json = %+v", cfg)
	}
	var helperPod corev1.Pod
	if err := sigsyaml.UnmarshalStrict([]byte(cm.Data["helperPod.yaml"]), &helperPod); err != nil {
		t.Fatalf("helperPod.yaml: %v", err)
	}
	if c := helperPod.Spec.Containers; len(c) != 1 || c[0].Image != lppImage || c[0].ImagePullPolicy != corev1.PullNever {
		t.Errorf("helper pod containers %+v, want the local-path-provisioner image, pull Never", c)
	}

	msDep := find[*appsv1.Deployment](t, objs, ms, "Deployment/kube-system/metrics-server")
	c := msDep.Spec.Template.Spec.Containers[0]
	if c.Image != release.Default().Image(release.MetricsServer) || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("metrics-server image %s pull %s", c.Image, c.ImagePullPolicy)
	}
	wantFlags(t, "metrics-server", c.Command,
		"--kubelet-certificate-authority=/etc/kiln/kubelet-serving-ca/"+KubeletServingCAKey,
		"--kubelet-preferred-address-types=InternalIP",
	)
	var caVolume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/kiln/kubelet-serving-ca" {
			caVolume = m.Name
		}
	}
	for _, v := range msDep.Spec.Template.Spec.Volumes {
		if v.Name == caVolume && (v.ConfigMap == nil || v.ConfigMap.Name != KubeletServingCAConfigMap) {
			t.Errorf("metrics-server's kubelet CA comes from %+v, want ConfigMap %s", v.VolumeSource, KubeletServingCAConfigMap)
		}
	}
	if caVolume == "" {
		t.Errorf("metrics-server mounts no kubelet serving CA")
	}
	for _, arg := range append(c.Command, c.Args...) {
		if strings.HasPrefix(arg, "--kubelet-insecure-tls") {
			t.Errorf("metrics-server runs with %s", arg)
		}
	}
	svc := find[*corev1.Service](t, objs, ms, "Service/kube-system/metrics-server")
	for k, v := range svc.Spec.Selector {
		if msDep.Spec.Template.Labels[k] != v {
			t.Errorf("metrics-server Service selects %s=%s, the pods are labelled %v", k, v, msDep.Spec.Template.Labels)
		}
	}
	api := find[*unstructured.Unstructured](t, objs, ms, "APIService//v1beta1.metrics.k8s.io")
	name, _, _ := unstructured.NestedString(api.Object, "spec", "service", "name")
	ns, _, _ := unstructured.NestedString(api.Object, "spec", "service", "namespace")
	group, _, _ := unstructured.NestedString(api.Object, "spec", "group")
	if name != svc.Name || ns != svc.Namespace || group != "metrics.k8s.io" || api.GetAPIVersion() != "apiregistration.k8s.io/v1" {
		t.Errorf("APIService points at %s/%s for group %q (%s)", ns, name, group, api.GetAPIVersion())
	}
}

// checkMachineInventory checks the machine inventory (the local platform's
// address plan; empty on none) and that the approver reads it, that one
// ConfigMap only, reads no Node, and denies the API's names and addresses
// and the cluster's networks.
func checkMachineInventory(t *testing.T, tc manifestCase, objs map[string]runtime.Object) {
	t.Helper()
	cm := find[*corev1.ConfigMap](t, objs, "manifests/05-machines.yaml", "ConfigMap/kube-system/kiln-machines")
	inv, err := inventory.FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range inv.Machines {
		_, rest, _ := strings.Cut(m.Name, "-") // the infra ID is <name>-<suffix>
		_, rest, _ = strings.Cut(rest, "-")
		if len(m.Addresses) != 1 || !strings.HasPrefix(rest, m.Role+"-") {
			t.Errorf("inventory machine %+v: want one address and its role in its name", m)
			continue
		}
		got = append(got, fmt.Sprintf("%s=%d", rest, m.Addresses[0].As4()[3]))
	}
	if strings.Join(got, " ") != tc.machines {
		t.Errorf("inventory = %q, want %q", strings.Join(got, " "), tc.machines)
	}

	const f = "manifests/12-csr-approver.yaml"
	role := find[*rbacv1.Role](t, objs, f, "Role/kube-system/kiln:csr-approver")
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"configmaps"}) ||
		!slices.Equal(role.Rules[0].ResourceNames, []string{inventory.Name}) || !slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("the approver's Role %+v, want read of ConfigMap %s only", role.Rules, inventory.Name)
	}
	binding := find[*rbacv1.RoleBinding](t, objs, f, "RoleBinding/kube-system/kiln:csr-approver")
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "kiln-csr-approver" {
		t.Errorf("the approver's RoleBinding %+v", binding)
	}
	var signers []string
	for _, r := range find[*rbacv1.ClusterRole](t, objs, f, "ClusterRole//kiln:csr-approver").Rules {
		switch {
		case slices.Contains(r.Resources, "configmaps") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*"):
			t.Errorf("the approver's ClusterRole grants %v on %v: it must read no ConfigMap but the inventory", r.Verbs, r.Resources)
		case slices.Contains(r.Resources, "nodes") && (!slices.Equal(r.Verbs, []string{"get"}) || len(r.Resources) != 1):
			t.Errorf("the approver's ClusterRole grants %v on %v: it may only tell whether a Node exists (get)", r.Verbs, r.Resources)
		case slices.Contains(r.Resources, "signers"):
			signers = append(signers, r.ResourceNames...)
		}
	}
	if want := []string{"kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet"}; !slices.Equal(signers, want) {
		t.Errorf("the approver may approve for signers %q, want %q: never kubernetes.io/kube-apiserver-client (any user)", signers, want)
	}
	argv := find[*appsv1.Deployment](t, objs, f, "Deployment/kiln-system/kiln-csr-approver").Spec.Template.Spec.Containers[0].Command
	wantFlags(t, "csr-approver", argv,
		"--deny-name=api."+tc.clusterName+"."+strings.TrimPrefix(tc.apiInt, "api-int."+tc.clusterName+"."),
		"--deny-name="+tc.apiInt,
		"--deny-domain="+ClusterDNSDomain,
		"--deny-cidr="+tc.serviceCIDR,
		"--deny-cidr="+tc.clusterCIDR,
	)
	vip := flagValue(argv, "--deny-ip")
	if tc.platform == "local" {
		if len(inv.Machines) == 0 || !strings.HasSuffix(vip, ".1") ||
			strings.TrimSuffix(vip, ".1") != strings.Join(strings.Split(inv.Machines[0].Addresses[0].String(), ".")[:3], ".") {
			t.Errorf("--deny-ip=%q, want the API VIP (.1 of the machine network)", vip)
		}
	} else if vip != "" {
		t.Errorf("--deny-ip=%q on a platform without an API VIP", vip)
	}
}

// checkNoConfigMapWriters checks that no role kiln ships lets anyone write
// ConfigMaps (the machine inventory among them): writes stay with
// administrators (system:masters).
func checkNoConfigMapWriters(t *testing.T, objs map[string]runtime.Object) {
	t.Helper()
	for k, o := range objs {
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules = r.Rules
		}
		for _, r := range rules {
			if !slices.Contains(r.Resources, "configmaps") && !slices.Contains(r.Resources, "*") {
				continue
			}
			for _, v := range r.Verbs {
				if v != "get" && v != "list" && v != "watch" {
					t.Errorf("%s grants %s on %v", k, v, r.Resources)
				}
			}
		}
	}
}

// nodeClientRole is the built-in ClusterRole with which kube-controller-manager
// approves a bootstrap token's node client CSRs by itself.
const nodeClientRole = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"

// checkNoBootstrapAutoApproval checks that no binding kiln ships lets a
// bootstrap token have its node client CSRs approved automatically: not
// the built-in nodeclient ClusterRole, nor a role of kiln's granting
// create on certificatesigningrequests/nodeclient, for the group
// system:bootstrappers (or one of its sub-groups), a bootstrap token user,
// or all authenticated users. Only kiln-csr-approver approves those, for
// the machine a token may claim.
func checkNoBootstrapAutoApproval(t *testing.T, objs map[string]runtime.Object) {
	t.Helper()
	autoApproves := map[string]bool{"ClusterRole/" + nodeClientRole: true}
	for _, o := range objs {
		var kind, name string
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			kind, name, rules = "ClusterRole", r.Name, r.Rules
		case *rbacv1.Role:
			kind, name, rules = "Role", r.Namespace+"/"+r.Name, r.Rules
		}
		for _, r := range rules {
			if (slices.Contains(r.Resources, "certificatesigningrequests/nodeclient") || slices.Contains(r.Resources, "*")) &&
				(slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "*")) {
				autoApproves[kind+"/"+name] = true
			}
		}
	}
	bootstrapper := func(s rbacv1.Subject) bool {
		switch s.Kind {
		case rbacv1.GroupKind:
			return s.Name == bootstraptoken.Group || strings.HasPrefix(s.Name, bootstraptoken.Group+":") ||
				s.Name == "system:authenticated" || s.Name == "system:unauthenticated"
		case rbacv1.UserKind:
			return strings.HasPrefix(s.Name, bootstraptoken.User)
		}
		return false
	}
	bindings := 0
	for k, o := range objs {
		var role string
		var subjects []rbacv1.Subject
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			role, subjects = b.RoleRef.Kind+"/"+b.RoleRef.Name, b.Subjects
		case *rbacv1.RoleBinding:
			role, subjects = b.RoleRef.Kind+"/"+b.RoleRef.Name, b.Subjects
			if b.RoleRef.Kind == "Role" {
				role = "Role/" + b.Namespace + "/" + b.RoleRef.Name
			}
		default:
			continue
		}
		bindings++
		if !autoApproves[role] {
			continue
		}
		for _, s := range subjects {
			if bootstrapper(s) {
				t.Errorf("%s binds %s %s to %s: bootstrap tokens' node client CSRs would be approved for any node name", k, s.Kind, s.Name, role)
			}
		}
	}
	if bindings == 0 {
		t.Error("no RBAC binding found: the check looked at nothing")
	}
}

// checkKubeletServingCA checks the published kubelet serving CA: its
// certificate alone, a CA, not the root CA.
func checkKubeletServingCA(t *testing.T, objs map[string]runtime.Object, files map[string][]byte) {
	t.Helper()
	const f = "manifests/06-kubelet-serving-ca.yaml"
	if strings.Contains(string(files[f]), "PRIVATE KEY") {
		t.Fatalf("%s holds a private key", f)
	}
	cm := find[*corev1.ConfigMap](t, objs, f, "ConfigMap/kube-system/"+KubeletServingCAConfigMap)
	if len(cm.Data) != 1 {
		t.Errorf("%s holds %d keys, want only %s", f, len(cm.Data), KubeletServingCAKey)
	}
	block, _ := pem.Decode([]byte(cm.Data[KubeletServingCAKey]))
	if block == nil {
		t.Fatalf("%s: %s is not PEM", f, KubeletServingCAKey)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.IsCA || cert.Subject.CommonName != "kiln-kubelet-serving-ca" {
		t.Errorf("%s: certificate %s (CA %v), want the kubelet serving CA", f, cert.Subject, cert.IsCA)
	}
}

// checkNetworkPolicyController checks kube-router's DaemonSet: only its
// policy controller runs, on every node, with kiln's service network and
// the API through api-int; its role only reads.
func checkNetworkPolicyController(t *testing.T, tc manifestCase, objs map[string]runtime.Object) {
	t.Helper()
	const f = "manifests/15-network-policy.yaml"
	ds := find[*appsv1.DaemonSet](t, objs, f, "DaemonSet/kube-system/kube-router")
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != release.Default().Image(release.KubeRouter) {
		t.Errorf("kube-router image %s, want %s", c.Image, release.Default().Image(release.KubeRouter))
	}
	for _, flag := range []string{"--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
		"--service-cluster-ip-range=" + tc.serviceCIDR, "--hostname-override=$(NODE_NAME)"} {
		if !slices.Contains(c.Command, flag) {
			t.Errorf("kube-router command %q lacks %s", c.Command, flag)
		}
	}
	if !pod.HostNetwork || len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("kube-router: hostNetwork %v, tolerations %+v; want the node's network on every node", pod.HostNetwork, pod.Tolerations)
	}
	cm := find[*corev1.ConfigMap](t, objs, f, "ConfigMap/kube-system/kube-router")
	if !strings.Contains(cm.Data["kubeconfig"], "server: https://"+tc.apiInt+":6443\n") {
		t.Errorf("kube-router kubeconfig does not point at %s:\n%s", tc.apiInt, cm.Data["kubeconfig"])
	}
	role := find[*rbacv1.ClusterRole](t, objs, f, "ClusterRole//kiln:kube-router")
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("kube-router may %s %v: it only reads", v, r.Resources)
			}
		}
	}
}

// TestAddonsOnMasters: CoreDNS, metrics-server and the local-path
// provisioner tolerate the masters' taint, except under Slower with
// workers, where they wait for the workers (which join after the
// bootstrap machine is gone); kiln's CSR approver always does, as it
// approves those workers' certificates.
func TestAddonsOnMasters(t *testing.T) {
	workers := func(n int) string {
		return fmt.Sprintf("compute:\n- name: worker\n  replicas: %d\n", n)
	}
	for _, tc := range []struct {
		name, config string
		onMasters    bool
	}{
		{"standard", installConfigYAML + workers(1), true},
		{"slower with workers", installConfigYAML + workers(1) + "controlPlaneHardwareSpeed: Slower\n", false},
		{"slower without workers", installConfigYAML + workers(0) + "controlPlaneHardwareSpeed: Slower\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := renderAll(t, tc.config)
			want := map[string]bool{
				"Deployment/kube-system/coredns":                       tc.onMasters,
				"Deployment/kube-system/metrics-server":                tc.onMasters,
				"Deployment/local-path-storage/local-path-provisioner": tc.onMasters,
				"Deployment/kiln-system/kiln-csr-approver":             true,
			}
			for file, data := range files {
				if !strings.HasPrefix(file, ManifestsDir+"/") {
					continue
				}
				for _, o := range decodeAll(t, file, data) {
					d, ok := o.Object.(*appsv1.Deployment)
					if !ok {
						continue
					}
					k := key(t, o)
					w, checked := want[k]
					if !checked {
						continue
					}
					delete(want, k)
					got := slices.ContainsFunc(d.Spec.Template.Spec.Tolerations, func(tol corev1.Toleration) bool {
						return tol.Key == "node-role.kubernetes.io/control-plane"
					})
					if got != w {
						t.Errorf("%s tolerates the masters' taint: %v, want %v", k, got, w)
					}
				}
			}
			if len(want) > 0 {
				t.Errorf("not rendered: %v", want)
			}
		})
	}
}
