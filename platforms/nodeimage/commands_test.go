package nodeimage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/kiln-project/kiln/assets/release"
)

func TestCommandArgv(t *testing.T) {
	tests := []struct {
		name string
		cmd  Command
		want []string
	}{
		{
			name: "debootstrap",
			cmd:  debootstrapCmd("http://deb.debian.org/debian", "/c/debootstrap/k.tmp/rootfs"),
			want: []string{"debootstrap", "--variant=minbase",
				"--include=systemd,systemd-sysv,dbus,iproute2,iptables,nftables,conntrack,ipset,ca-certificates,containernetworking-plugins,ignition,procps,curl,less",
				"bookworm", "/c/debootstrap/k.tmp/rootfs", "http://deb.debian.org/debian"},
		},
		{
			name: "ctr import",
			cmd:  ctrImportCmd("/opt/kiln/images/etcd.tar"),
			want: []string{"ctr", "-n", "k8s.io", "images", "import", "/opt/kiln/images/etcd.tar"},
		},
		{
			name: "ctr list",
			cmd:  ctrListCmd(),
			want: []string{"ctr", "-n", "k8s.io", "images", "ls", "-q"},
		},
		{
			name: "systemctl enable",
			cmd:  systemctlCmd("/r", "enable", []string{"a.service", "b.service"}),
			want: []string{"chroot", "/r", "systemctl", "enable", "a.service", "b.service"},
		},
		{
			name: "ldd",
			cmd:  lddCmd("/r", []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/conntrack"}),
			want: []string{"chroot", "/r", "ldd", "/usr/sbin/xtables-nft-multi", "/usr/sbin/conntrack"},
		},
		{
			name: "copy base tree",
			cmd:  copyTreeCmd("/c/debootstrap/k/rootfs", "/c/images/node-x.tmp/rootfs"),
			want: []string{"cp", "-a", "--reflink=auto", "/c/debootstrap/k/rootfs", "/c/images/node-x.tmp/rootfs"},
		},
		{
			name: "zstd",
			cmd:  zstdCmd(),
			want: []string{"zstd", "-q", "-T0", "-3", "-c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := append([]string{tt.cmd.Path}, tt.cmd.Args...)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("argv\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestGoBuildCmd(t *testing.T) {
	byName := map[string]Component{}
	for _, c := range Components(release.Default()) {
		byName[c.Name] = c
	}
	tests := []struct {
		component string
		// wantFlags come between -trimpath and -ldflags.
		wantFlags []string
		wantLD    []string
		wantPkgs  []string
		wantCgo   bool
	}{
		{
			component: "kubernetes",
			wantLD: []string{
				"-s -w ",
				"-X k8s.io/component-base/version.gitVersion=v1.36.3",
				"-X k8s.io/component-base/version.gitMajor=1",
				"-X k8s.io/component-base/version.gitMinor=36",
				"-X k8s.io/component-base/version.gitTreeState=clean",
				"-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z",
				"-X k8s.io/client-go/pkg/version.gitVersion=v1.36.3",
			},
			wantPkgs: []string{
				"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
				"k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kube-proxy",
				"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kubectl",
			},
		},
		{
			component: "etcd",
			wantLD:    []string{"-X go.etcd.io/etcd/api/v3/version.GitSHA=v3.6.16"},
			wantPkgs:  []string{".", "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3"},
		},
		{
			component: "coredns",
			wantLD:    []string{"-X github.com/coredns/coredns/coremain.GitCommit=v1.15.0"},
			wantPkgs:  []string{"."},
		},
		{
			component: "pause",
			wantLD:    []string{"-X main.version=3.10"},
			wantPkgs:  []string{"."},
		},
		{
			component: "local-path-provisioner",
			wantLD:    []string{"-X main.VERSION=v0.0.30"},
			wantPkgs:  []string{"github.com/rancher/local-path-provisioner", "./local-path-helper"},
		},
		{
			component: "metrics-server",
			wantLD:    []string{"-X k8s.io/client-go/pkg/version.gitVersion=v0.9.0"},
			wantPkgs:  []string{"sigs.k8s.io/metrics-server/cmd/metrics-server"},
		},
		{
			component: "kube-router",
			wantLD: []string{
				"-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v2.1.0",
				"-X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=1970-01-01T00:00:00Z",
			},
			wantPkgs: []string{"github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"},
		},
		{
			// Its source carries its version; go build names the
			// binaries controller and speaker (Renames).
			component: "metallb",
			wantLD:    []string{"-s -w"},
			wantPkgs:  []string{"go.universe.tf/metallb/controller", "go.universe.tf/metallb/speaker"},
		},
		{
			component: "containerd",
			wantFlags: []string{"-tags", "urfave_cli_no_docs"},
			// Without the "v": the node reports containerd://2.4.2.
			wantLD: []string{"-s -w -X github.com/containerd/containerd/v2/version.Version=2.4.2"},
			wantPkgs: []string{
				"github.com/containerd/containerd/v2/cmd/containerd",
				"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
				"github.com/containerd/containerd/v2/cmd/ctr",
			},
		},
		{
			component: "runc",
			wantFlags: append(staticCgoFlags(t), "-tags", "seccomp,urfave_cli_no_docs,netgo,osusergo"),
			wantLD:    []string{"-s -w -X main.gitCommit=v1.5.2"},
			wantPkgs:  []string{"github.com/opencontainers/runc"},
			wantCgo:   true,
		},
	}
	if len(tests) != len(byName) {
		t.Errorf("%d components, the test knows %d", len(byName), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.component, func(t *testing.T) {
			c, ok := byName[tt.component]
			if !ok {
				t.Fatalf("no component %s", tt.component)
			}
			cmd := GoBuildCmd("/usr/local/go/bin/go", "/cache", c, "/cache/components/x.tmp/src", "/cache/components/x.tmp/bin")
			wantHead := append(append([]string{"build", "-v", "-trimpath"}, tt.wantFlags...), "-ldflags")
			if len(cmd.Args) < len(wantHead)+1 || !reflect.DeepEqual(cmd.Args[:len(wantHead)], wantHead) {
				t.Fatalf("args %q, want them to start %q", cmd.Args, wantHead)
			}
			ld := cmd.Args[len(wantHead)]
			for _, w := range tt.wantLD {
				if !strings.Contains(ld, w) {
					t.Errorf("-ldflags %q lacks %q", ld, w)
				}
			}
			if _, static := staticCgo(runtime.GOARCH); tt.wantCgo != strings.HasSuffix(ld, " "+strings.Join(static, " ")) {
				t.Errorf("-ldflags %q: static cgo link flags %q present = %v, want %v", ld, static, !tt.wantCgo, tt.wantCgo)
			}
			wantTail := append([]string{"-o", "/cache/components/x.tmp/bin/"}, tt.wantPkgs...)
			if !reflect.DeepEqual(cmd.Args[len(wantHead)+1:], wantTail) {
				t.Errorf("args after -ldflags %q, want %q", cmd.Args[len(wantHead)+1:], wantTail)
			}
			if cmd.Dir != "/cache/components/x.tmp/src" || cmd.Path != "/usr/local/go/bin/go" {
				t.Errorf("dir %q path %q", cmd.Dir, cmd.Path)
			}
			cgo := "CGO_ENABLED=0"
			if tt.wantCgo {
				cgo = "CGO_ENABLED=1"
			}
			wantEnv := []string{
				cgo, "GOOS=linux", "GOARCH=" + runtime.GOARCH, "GOFLAGS=-mod=mod",
				"GOWORK=off", "GOTOOLCHAIN=local", "GOCACHE=/cache/go/build", "GOMODCACHE=/cache/go/mod",
			}
			if !reflect.DeepEqual(cmd.Env, wantEnv) {
				t.Errorf("env\n got %q\nwant %q", cmd.Env, wantEnv)
			}
		})
	}
}

// staticCgoFlags are the build flags of a static cgo build on this
// machine's architecture.
func staticCgoFlags(t *testing.T) []string {
	t.Helper()
	flags, _ := staticCgo(runtime.GOARCH)
	return flags
}

// TestStaticCgo checks the static link of a cgo component against runc's
// Makefile: a static PIE on amd64 and arm64, a plain static executable
// elsewhere.
func TestStaticCgo(t *testing.T) {
	tests := []struct {
		goarch    string
		wantBuild []string
		wantLD    []string
	}{
		{"amd64", []string{"-buildmode=pie"}, []string{"-linkmode", "external", "-extldflags", "-static-pie"}},
		{"arm64", []string{"-buildmode=pie"}, []string{"-linkmode", "external", "-extldflags", "-static-pie"}},
		{"ppc64le", nil, []string{"-extldflags", "-static"}},
		{"riscv64", nil, []string{"-extldflags", "-static"}},
	}
	for _, tt := range tests {
		build, ld := staticCgo(tt.goarch)
		if !reflect.DeepEqual(build, tt.wantBuild) || !reflect.DeepEqual(ld, tt.wantLD) {
			t.Errorf("staticCgo(%s) = %q, %q; want %q, %q", tt.goarch, build, ld, tt.wantBuild, tt.wantLD)
		}
	}
}

// TestPrefetchCmd checks that the prefetch loads the same packages as the
// build, in the same directory and environment, so that it downloads what
// the build reads.
func TestPrefetchCmd(t *testing.T) {
	for _, c := range Components(release.Default()) {
		build := GoBuildCmd("/go", "/cache", c, "/src", "/out")
		got := prefetchCmd("/go", "/cache", c, "/src")
		want := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, c.Packages...)
		if got.Path != "/go" || !reflect.DeepEqual(got.Args, want) {
			t.Errorf("%s: argv %s %q, want /go %q", c.Name, got.Path, got.Args, want)
		}
		if got.Dir != build.Dir || !reflect.DeepEqual(got.Env, build.Env) {
			t.Errorf("%s: dir %q env %q; the build has %q %q", c.Name, got.Dir, got.Env, build.Dir, build.Env)
		}
	}
}

func TestPreimportCmd(t *testing.T) {
	c := preimportCmd("/c/images/node-x.tmp/rootfs")
	want := []string{"unshare", "--mount", "--pid", "--fork", "--propagation", "private",
		"sh", "-c", preimportOuter, "kiln-preimport", "/c/images/node-x.tmp/rootfs", preimportInner}
	if got := append([]string{c.Path}, c.Args...); !reflect.DeepEqual(got, want) {
		t.Errorf("argv\n got %q\nwant %q", got, want)
	}
	// The inner script runs the node's own import script, which the image
	// must carry, executable.
	if !strings.Contains(preimportInner, "\n"+importScript+"\n") {
		t.Errorf("the pre-import does not run %s", importScript)
	}
	files, err := bakedFiles()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range files {
		if f.Path == importScript {
			found = f.Mode&0o111 != 0
		}
	}
	if !found {
		t.Errorf("the image has no executable %s", importScript)
	}
	// Everything it mounts is inside the tree, never on the host's paths.
	for _, line := range strings.Split(preimportOuter, "\n") {
		if strings.HasPrefix(line, "mount ") && !strings.HasSuffix(line, `"$root/proc"`) &&
			!strings.HasSuffix(line, `"$root/sys"`) && !strings.HasSuffix(line, `"$root/run"`) && !strings.HasSuffix(line, `"$root/tmp"`) {
			t.Errorf("mount outside the tree: %s", line)
		}
	}
}

func TestPreimportFallsBackToBootImport(t *testing.T) {
	for _, fail := range []bool{false, true} {
		rootfs := t.TempDir()
		meta := filepath.Join(rootfs, containerdRoot, "io.containerd.metadata.v1.bolt", "meta.db")
		if err := os.MkdirAll(filepath.Dir(meta), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(meta, []byte("half written"), 0o644); err != nil {
			t.Fatal(err)
		}
		log, hook := test.NewNullLogger()
		var ran []string
		run := func(_ context.Context, c Command) error {
			ran = append(ran, c.Path)
			if fail {
				return errors.New("overlayfs snapshotter cannot be enabled")
			}
			return nil
		}
		if err := preimport(context.Background(), rootfs, run, log); err != nil {
			t.Fatalf("fail=%v: %v", fail, err)
		}
		if len(ran) != 1 || ran[0] != "unshare" {
			t.Errorf("fail=%v: ran %q", fail, ran)
		}
		_, err := os.Stat(meta)
		if kept := err == nil; kept == fail {
			t.Errorf("fail=%v: containerd root kept = %v", fail, kept)
		}
		if warned := len(hook.AllEntries()) > 0; warned != fail {
			t.Errorf("fail=%v: warned = %v", fail, warned)
		}
	}
}
