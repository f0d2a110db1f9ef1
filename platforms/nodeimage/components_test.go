package nodeimage

import (
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/release"
)

// TestComponentSources checks that every wrapper module renders with the
// pinned versions and that its go.sum.in covers them, so a version bump in
// assets/release without new checksums fails here and not in a long build.
func TestComponentSources(t *testing.T) {
	tests := []struct {
		name     string
		wantMod  []string
		wantSum  []string
		wantMain bool
	}{
		{
			name: "kubernetes",
			wantMod: []string{
				"require k8s.io/kubernetes v1.36.3",
				"k8s.io/api => k8s.io/api v0.36.3",
				"k8s.io/cri-streaming => k8s.io/cri-streaming v0.36.3",
				"k8s.io/streaming => k8s.io/streaming v0.36.3",
				"k8s.io/kubelet => k8s.io/kubelet v0.36.3",
			},
			wantSum: []string{"k8s.io/kubernetes v1.36.3 h1:", "k8s.io/api v0.36.3 h1:", "k8s.io/kubelet v0.36.3 h1:"},
		},
		{
			name:     "etcd",
			wantMod:  []string{"go.etcd.io/etcd/server/v3 v3.6.16", "go.etcd.io/etcd/etcdctl/v3 v3.6.16", "go.etcd.io/etcd/etcdutl/v3 v3.6.16"},
			wantSum:  []string{"go.etcd.io/etcd/server/v3 v3.6.16 h1:", "go.etcd.io/etcd/etcdctl/v3 v3.6.16 h1:", "go.etcd.io/etcd/etcdutl/v3 v3.6.16 h1:"},
			wantMain: true,
		},
		{
			name:     "coredns",
			wantMod:  []string{"require github.com/coredns/coredns v1.15.0"},
			wantSum:  []string{"github.com/coredns/coredns v1.15.0 h1:"},
			wantMain: true,
		},
		{name: "pause", wantMod: []string{"module kiln.local/components/pause"}, wantMain: true},
		{
			name: "local-path-provisioner",
			// The release's client libraries, as the Kubernetes component's.
			wantMod: []string{"require github.com/rancher/local-path-provisioner v0.0.30", "k8s.io/client-go v0.36.3\n", "k8s.io/apimachinery v0.36.3\n"},
			wantSum: []string{"github.com/rancher/local-path-provisioner v0.0.30 h1:", "k8s.io/client-go v0.36.3 h1:"},
		},
		{
			name:    "metrics-server",
			wantMod: []string{"require sigs.k8s.io/metrics-server v0.9.0"},
			wantSum: []string{"sigs.k8s.io/metrics-server v0.9.0 h1:", "k8s.io/apiserver v0.36.2 h1:"},
		},
		{
			name:    "kube-router",
			wantMod: []string{"require github.com/cloudnativelabs/kube-router/v2 v2.1.0", "tool github.com/cloudnativelabs/kube-router/v2/cmd/kube-router\n"},
			// Its policy controller's iptables and netlink libraries.
			wantSum: []string{"github.com/cloudnativelabs/kube-router/v2 v2.1.0 h1:", "github.com/coreos/go-iptables v0.7.0 h1:"},
		},
		{
			name: "containerd",
			wantMod: []string{
				"require github.com/containerd/containerd/v2 v2.4.2",
				"github.com/containerd/containerd/v2/cmd/containerd\n",
				"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2\n",
				"github.com/containerd/containerd/v2/cmd/ctr\n",
			},
			wantSum: []string{"github.com/containerd/containerd/v2 v2.4.2 h1:"},
		},
		{
			name:    "metallb",
			wantMod: []string{"require go.universe.tf/metallb v0.15.2", "go.universe.tf/metallb/controller\n", "go.universe.tf/metallb/speaker\n"},
			// Not v0.0.27, which v0.16.2 needs and the module proxy does not serve.
			wantSum: []string{"go.universe.tf/metallb v0.15.2 h1:", "github.com/metallb/frr-k8s v0.0.20 h1:"},
		},
		{
			name:    "runc",
			wantMod: []string{"require github.com/opencontainers/runc v1.5.2", "tool github.com/opencontainers/runc\n"},
			// runc's seccomp support: the seccomp build tag links it.
			wantSum: []string{"github.com/opencontainers/runc v1.5.2 h1:", "github.com/seccomp/libseccomp-golang v0.12.0 h1:"},
		},
		{
			name:     "registry",
			wantMod:  []string{"github.com/distribution/distribution/v3 v3.1.2"},
			wantSum:  []string{"github.com/distribution/distribution/v3 v3.1.2 h1:", "github.com/sirupsen/logrus v1.10.2 h1:"},
			wantMain: true,
		},
	}
	comps := map[string]Component{}
	for _, c := range append(Components(release.Default()), registryComponent()) {
		comps[c.Name] = c
	}
	if len(comps) != len(tests) {
		t.Errorf("%d components, the test knows %d", len(comps), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := comps[tt.name].Sources()
			if err != nil {
				t.Fatal(err)
			}
			mod := string(files["go.mod"])
			if strings.Contains(mod, "{{") {
				t.Errorf("go.mod not fully rendered:\n%s", mod)
			}
			for _, w := range tt.wantMod {
				if !strings.Contains(mod, w) {
					t.Errorf("go.mod lacks %q", w)
				}
			}
			for _, w := range tt.wantSum {
				if !strings.Contains(string(files["go.sum"]), w) {
					t.Errorf("go.sum lacks %q", w)
				}
			}
			if _, ok := files["main.go"]; ok != tt.wantMain {
				t.Errorf("main.go present = %v, want %v", ok, tt.wantMain)
			}
		})
	}
}

// TestKubernetesReplacesEveryStagingModule guards the list of replace
// directives: k8s.io/kubernetes requires every staging module at v0.0.0, so
// one missing replace breaks the build.
func TestKubernetesReplacesEveryStagingModule(t *testing.T) {
	files := componentFiles(t, "kubernetes")
	staging := []string{
		"api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
		"cloud-provider", "cluster-bootstrap", "code-generator", "component-base", "component-helpers",
		"controller-manager", "cri-api", "cri-client", "cri-streaming", "csi-translation-lib",
		"dynamic-resource-allocation", "endpointslice", "externaljwt", "kms", "kube-aggregator",
		"kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl", "kubelet", "metrics",
		"mount-utils", "pod-security-admission", "sample-apiserver", "sample-controller", "streaming",
	}
	mod := string(files["go.mod"])
	for _, m := range staging {
		line := "k8s.io/" + m + " => k8s.io/" + m + " " + release.Default().KubernetesStaging
		if !strings.Contains(mod, line) {
			t.Errorf("go.mod lacks %q", line)
		}
	}
	if strings.Contains(mod, "sample-cli-plugin") {
		t.Error("go.mod replaces k8s.io/sample-cli-plugin, which is not on the module proxy")
	}
}

func TestComponentKey(t *testing.T) {
	c := Components(release.Default())[0]
	files := map[string][]byte{"go.mod": []byte("module a\n"), "go.sum": []byte("x h1:y\n")}
	base := c.Key("go1.26.8", files)
	if again := c.Key("go1.26.8", map[string][]byte{"go.sum": []byte("x h1:y\n"), "go.mod": []byte("module a\n")}); again != base {
		t.Errorf("same inputs gave keys %s and %s", base, again)
	}
	changed := []struct {
		name string
		key  func() string
	}{
		{"go version", func() string { return c.Key("go1.26.9", files) }},
		{"file content", func() string {
			return c.Key("go1.26.8", map[string][]byte{"go.mod": []byte("module b\n"), "go.sum": []byte("x h1:y\n")})
		}},
		{"file name", func() string {
			return c.Key("go1.26.8", map[string][]byte{"go.mod": []byte("module a\n"), "go.sum2": []byte("x h1:y\n")})
		}},
		{"ldflags", func() string {
			d := c
			d.LDFlags = append(append([]string(nil), c.LDFlags...), "-X main.x=y")
			return d.Key("go1.26.8", files)
		}},
		{"packages", func() string {
			d := c
			d.Packages = d.Packages[1:]
			return d.Key("go1.26.8", files)
		}},
		{"tags", func() string {
			d := c
			d.Tags = []string{"seccomp"}
			return d.Key("go1.26.8", files)
		}},
		{"cgo", func() string {
			d := c
			d.Cgo = true
			return d.Key("go1.26.8", files)
		}},
	}
	for _, tt := range changed {
		if tt.key() == base {
			t.Errorf("changing the %s did not change the key", tt.name)
		}
	}
}

// TestComponentKeyFollowsVersion checks that a new pinned version of a
// component gives it a new cache entry (its go.mod requires the version),
// and the same version the same entry.
func TestComponentKeyFollowsVersion(t *testing.T) {
	for _, c := range Components(release.Default()) {
		if c.Name != "containerd" && c.Name != "runc" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			key := func(c Component) string {
				files, err := c.Sources()
				if err != nil {
					t.Fatal(err)
				}
				return c.Key("go1.26.8", files)
			}
			base := key(c)
			if again := key(c); again != base {
				t.Errorf("same version gave keys %s and %s", base, again)
			}
			bumped := c
			bumped.Version += "-next"
			if key(bumped) == base {
				t.Errorf("version %s and %s share the key %s", c.Version, bumped.Version, base)
			}
		})
	}
}

func TestHasherFraming(t *testing.T) {
	a := NewHasher("k")
	a.Add("x", "ab")
	a.Add("y", "c")
	b := NewHasher("k")
	b.Add("x", "a")
	b.Add("y", "bc")
	if a.Sum() == b.Sum() {
		t.Error("moving bytes between parts did not change the key")
	}
}
