package e2e

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// requireNodeImageHost skips unless the node image can be built here. A
// cold build takes tens of minutes: run with -timeout 90m.
func requireNodeImageHost(tb testing.TB) {
	tb.Helper()
	if os.Getenv("KILN_E2E") != "1" {
		tb.Skip("end-to-end test: set KILN_E2E=1 to run it (needs root, debootstrap, Go, the module proxy and a Debian mirror)")
	}
	if os.Geteuid() != 0 {
		tb.Skip("building the node image needs root (debootstrap, chroot)")
	}
	for _, tool := range []string{"debootstrap", "chroot", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("building the node image needs %s on PATH", tool)
		}
	}
}

// ensureNodeImage builds the image into the kiln cache (KILN_CACHE_DIR or
// the default), or reuses it.
func ensureNodeImage(tb testing.TB, log logrus.FieldLogger) *nodeimage.Image {
	tb.Helper()
	img, err := nodeimage.Ensure(context.Background(), nodeimage.Options{Log: log})
	if err != nil {
		tb.Fatalf("nodeimage.Ensure: %v", err)
	}
	return img
}

func TestNodeImageBuild(t *testing.T) {
	requireNodeImageHost(t)
	log := logrus.New()
	log.SetLevel(logrus.DebugLevel)
	log.SetOutput(nodeImageTestWriter{t})
	img := ensureNodeImage(t, log)
	t.Logf("node image %s at %s", img.Hash, img.RootFS)

	t.Run("versions", func(t *testing.T) {
		k8s := "Kubernetes " + release.Default().Kubernetes
		tests := []struct {
			argv []string
			want string
		}{
			{[]string{"/usr/local/bin/kube-apiserver", "--version"}, k8s},
			{[]string{"/usr/local/bin/kube-controller-manager", "--version"}, k8s},
			{[]string{"/usr/local/bin/kube-scheduler", "--version"}, k8s},
			{[]string{"/usr/local/bin/kube-proxy", "--version"}, k8s},
			{[]string{"/usr/local/bin/kubelet", "--version"}, k8s},
			{[]string{"/usr/local/bin/kubectl", "version", "--client"}, "Client Version: " + release.Default().Kubernetes},
			{[]string{"/usr/local/bin/etcd", "--version"}, "etcd Version: " + strings.TrimPrefix(release.Default().Etcd, "v")},
			{[]string{"/usr/local/bin/etcdctl", "version"}, "etcdctl version: " + strings.TrimPrefix(release.Default().Etcd, "v")},
			{[]string{"/usr/local/bin/etcdutl", "version"}, "etcdutl version: " + strings.TrimPrefix(release.Default().Etcd, "v")},
			{[]string{"/usr/local/bin/coredns", "-version"}, "CoreDNS-" + strings.TrimPrefix(release.Default().CoreDNS, "v")},
			{[]string{"/usr/local/bin/pause", "-v"}, "pause " + release.PauseVersion},
			// Built from source into /usr/local/bin, found on the node's PATH.
			{[]string{"containerd", "--version"}, "containerd github.com/containerd/containerd/v2 " + strings.TrimPrefix(release.ContainerdVersion, "v")},
			{[]string{"ctr", "--version"}, "ctr github.com/containerd/containerd/v2 " + strings.TrimPrefix(release.ContainerdVersion, "v")},
			{[]string{"containerd-shim-runc-v2", "-v"}, strings.TrimPrefix(release.ContainerdVersion, "v")},
			// libseccomp linked in: RuntimeDefault seccomp profiles work.
			{[]string{"runc", "--version"}, "runc version " + strings.TrimPrefix(release.RuncVersion, "v") + "\n"},
			{[]string{"runc", "--version"}, "libseccomp: "},
			{[]string{"/usr/lib/dracut/modules.d/30ignition/ignition", "-version"}, "Ignition"},
		}
		for _, tt := range tests {
			out := chrootRun(t, img.RootFS, tt.argv...)
			if !strings.Contains(out, tt.want) {
				t.Errorf("%s: output lacks %q:\n%s", strings.Join(tt.argv, " "), tt.want, out)
			}
		}
	})

	t.Run("containerd config", func(t *testing.T) {
		out := chrootRun(t, img.RootFS, "containerd", "--config", "/etc/containerd/config.toml", "config", "dump")
		for _, want := range []string{
			"sandbox = '" + release.Default().Image(release.Pause) + "'",
			"snapshotter = 'overlayfs'",
			"config_path = '/etc/containerd/certs.d'",
			"restrict_oom_score_adj = true",
			// The runtime's CPU sampler (the images plugin's snapshot
			// stats, an int, are another key of the same name).
			"stats_collect_period = '10s'",
			"SystemdCgroup = true",
			"bin_dirs = ['/usr/lib/cni']",
			"conf_dir = '/etc/cni/net.d'",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("containerd config dump lacks %q", want)
			}
		}
	})

	t.Run("images", func(t *testing.T) {
		var index map[string]struct{ File, Ref string }
		readJSON(t, filepath.Join(img.RootFS, nodeimage.ImagesDir, "index.json"), &index)
		for _, spec := range release.Default().Images() {
			entry, ok := index[string(spec.Component)]
			if !ok || entry.Ref != spec.Ref() {
				t.Errorf("index.json: %s = %+v, want ref %s", spec.Component, entry, spec.Ref())
				continue
			}
			layer := extractImage(t, filepath.Join(img.RootFS, nodeimage.ImagesDir, entry.File), spec.Ref())
			for _, b := range spec.Binaries {
				if fi, err := os.Stat(filepath.Join(layer, "usr/local/bin", b)); err != nil || fi.Mode().Perm()&0o100 == 0 {
					t.Errorf("%s: /usr/local/bin/%s missing or not executable (%v)", spec.Ref(), b, err)
				}
			}
			if spec.Component == release.KubeProxy {
				// The tools must run inside the image alone: every library
				// and iptables extension they need was copied.
				for _, argv := range [][]string{
					{"/usr/sbin/iptables", "--version"}, {"/usr/sbin/ip6tables-restore", "--version"},
					{"/usr/sbin/iptables-save", "--version"}, {"/usr/sbin/conntrack", "--version"},
					{"/usr/sbin/nft", "--version"},
				} {
					chrootRun(t, layer, argv...)
				}
				// The rules kube-proxy writes load iptables extensions
				// (dlopen): add one in a private network namespace.
				rule := exec.Command("unshare", "-n", "sh", "-c",
					"chroot \"$0\" /usr/sbin/iptables -t nat -A POSTROUTING -m comment --comment kiln "+
						"-m statistic --mode random --probability 0.5 -j MASQUERADE && chroot \"$0\" /usr/sbin/iptables-save -t nat", layer)
				out, err := rule.CombinedOutput()
				if err != nil || !strings.Contains(string(out), "--comment kiln") {
					t.Errorf("iptables in the kube-proxy image: %v\n%s", err, out)
				}
				// kube-proxy's nftables mode reads its maps back with nft
				// --json and keeps an element only if its key reads as it
				// wrote it: tcp, which nft names from the image's
				// /etc/protocols (else 6, and every Service element of a
				// restarted kube-proxy was deleted as stale).
				nft := exec.Command("unshare", "-n", "sh", "-c",
					"chroot \"$0\" /usr/sbin/nft 'add table ip kiln; add chain ip kiln c; "+
						"add map ip kiln m { type inet_proto . inet_service : verdict; }; add element ip kiln m { tcp . 31080 : goto c }' && "+
						"chroot \"$0\" /usr/sbin/nft --json list map ip kiln m", layer)
				out, err = nft.CombinedOutput()
				if err != nil || !strings.Contains(string(out), `{"concat": ["tcp", 31080]}`) {
					t.Errorf("nft in the kube-proxy image lists a map element other than as kube-proxy wrote it (tcp . 31080): %v\n%s", err, out)
				}
			}
			if spec.Component == release.KubeRouter {
				// kube-router's policy chains match ipsets: both tools and
				// the set match run in the image alone.
				chrootRun(t, layer, "/usr/sbin/ipset", "--version")
				rule := exec.Command("unshare", "-n", "sh", "-c",
					"chroot \"$0\" /usr/sbin/ipset create kiln-e2e hash:ip timeout 0 && "+
						"chroot \"$0\" /usr/sbin/iptables -A FORWARD -m set --match-set kiln-e2e src -m comment --comment kiln -j REJECT && "+
						"chroot \"$0\" /usr/sbin/iptables-save -t filter", layer)
				out, err := rule.CombinedOutput()
				if err != nil || !strings.Contains(string(out), "--match-set kiln-e2e src") {
					t.Errorf("ipset and iptables in the kube-router image: %v\n%s", err, out)
				}
			}
		}
	})

	t.Run("release and units", func(t *testing.T) {
		var info release.Info
		readJSON(t, filepath.Join(img.RootFS, "etc/kiln/release.json"), &info)
		if info.Kubernetes != release.Default().Kubernetes || info.Images["etcd"] != release.Default().Image(release.Etcd) ||
			info.Containerd != release.ContainerdVersion || info.Runc != release.RuncVersion {
			t.Errorf("release.json = %+v", info)
		}
		wants := filepath.Join(img.RootFS, "etc/systemd/system/multi-user.target.wants")
		for _, u := range []string{"kiln-ignition.service", "kiln-images.service", "containerd.service", "systemd-networkd.service"} {
			if _, err := os.Lstat(filepath.Join(wants, u)); err != nil {
				t.Errorf("%s is not enabled: %v", u, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(wants, "kubelet.service")); err == nil {
			t.Error("kubelet is enabled in the image; Ignition configs enable it")
		}
		if target, err := os.Readlink(filepath.Join(img.RootFS, "etc/systemd/system/getty.target")); err != nil || target != "/dev/null" {
			t.Errorf("getty.target not masked: %q, %v", target, err)
		}
		if data, err := os.ReadFile(filepath.Join(img.RootFS, "etc/machine-id")); err != nil || len(data) != 0 {
			t.Errorf("/etc/machine-id should be empty: %q, %v", data, err)
		}
	})

	t.Run("cached", func(t *testing.T) {
		again := ensureNodeImage(t, log)
		if again.Hash != img.Hash || again.RootFS != img.RootFS {
			t.Errorf("second Ensure gave %s at %s, want %s at %s", again.Hash, again.RootFS, img.Hash, img.RootFS)
		}
	})
}

// BenchmarkNodeImageEnsureCached measures Ensure when the image is cached:
// what every `kiln create cluster` pays.
func BenchmarkNodeImageEnsureCached(b *testing.B) {
	requireNodeImageHost(b)
	ensureNodeImage(b, nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ensureNodeImage(b, nil)
	}
}

func chrootRun(t *testing.T, root string, argv ...string) string {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{root}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("chroot %s %s: %v\n%s", root, strings.Join(argv, " "), err, out)
	}
	return string(out)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// extractImage checks that archive is a docker-archive of ref with one
// layer and extracts that layer into a temporary directory.
func extractImage(t *testing.T, archive, ref string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	files := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p := filepath.Join(dir, "archive", filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
		files[h.Name] = p
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	readJSON(t, files["manifest.json"], &manifest)
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != ref || len(manifest[0].Layers) != 1 {
		t.Fatalf("%s: manifest.json = %+v", archive, manifest)
	}
	if _, ok := files[manifest[0].Config]; !ok {
		t.Fatalf("%s: config %s missing", archive, manifest[0].Config)
	}
	layer := filepath.Join(dir, "layer")
	if err := os.Mkdir(layer, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xf", files[manifest[0].Layers[0]], "-C", layer).CombinedOutput(); err != nil {
		t.Fatalf("%s: extracting the layer: %v\n%s", archive, err, out)
	}
	return layer
}

type nodeImageTestWriter struct{ t *testing.T }

func (w nodeImageTestWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
