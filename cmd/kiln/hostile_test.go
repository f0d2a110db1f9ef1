package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-project/kiln/graph/atomicfile/atomicfiletest"
)

// hostileInstallConfig is the install-config every prepared --dir starts from.
const hostileInstallConfig = `apiVersion: kiln.dev/v1
metadata:
  name: dev
baseDomain: example.com
platform:
  none: {}
`

// hostileCase is one hostile --dir: prepared by kiln up to a target, then
// spoiled by the corpus folder of the same name (testdata/hostile/<name>)
// and by spoil, then given to one command.
type hostileCase struct {
	name string
	// prepare is the target kiln creates first: "", "install-config",
	// "manifests" or "ignition-configs".
	prepare string
	spoil   func(t *testing.T, dir string)
	// args run with --dir <dir> appended unless inCwd; then in dir as the
	// current directory without --dir.
	args  []string
	inCwd bool
	code  int
	// msg must be in stderr (it names the file), and so must each of more;
	// absent must not be.
	msg, absent string
	more        []string
}

// D9, D10 and deliverable 10: no panic, the documented exit code, a message
// naming what is wrong, and the work area byte-for-byte as it was.
func TestHostileDirs(t *testing.T) {
	rm := func(p string) func(*testing.T, string) {
		return func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, p))) }
	}
	mkdir := func(p string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			must(t, os.RemoveAll(filepath.Join(dir, p)))
			must(t, os.Mkdir(filepath.Join(dir, p), 0o755))
		}
	}
	// The negative-timeout cases also pass --api-timeout=1ms, so that a
	// regression fails at once instead of waiting for an API.
	cases := []hostileCase{
		// Odd file types where install-config.yaml belongs.
		{name: "install-config is a directory", spoil: mkdir("install-config.yaml"),
			args: []string{"create", "manifests"}, code: 2, msg: "install-config.yaml is a directory", absent: "no install-config.yaml"},
		{name: "install-config is a FIFO", spoil: func(t *testing.T, dir string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "install-config.yaml"), 0o600))
		}, args: []string{"create", "manifests"}, code: 2, msg: "install-config.yaml is a named pipe", absent: "no install-config.yaml"},
		{name: "install-config is a dangling symlink", spoil: func(t *testing.T, dir string) {
			must(t, os.Symlink("gone.yaml", filepath.Join(dir, "install-config.yaml")))
		}, args: []string{"create", "manifests"}, code: 2, msg: "install-config.yaml is a symbolic link to gone.yaml", absent: "no install-config.yaml"},
		{name: "dir does not exist", spoil: func(t *testing.T, dir string) { must(t, os.Remove(dir)) },
			args: []string{"create", "manifests"}, code: 2, msg: "does not exist", absent: "no install-config.yaml"},
		{name: "dir is a file", spoil: func(t *testing.T, dir string) {
			must(t, os.Remove(dir))
			must(t, os.WriteFile(dir, []byte("a file"), 0o644))
		}, args: []string{"create", "ignition-configs"}, code: 2, msg: "is not a directory"},
		{name: "dir is a file for destroy", spoil: func(t *testing.T, dir string) {
			must(t, os.Remove(dir))
			must(t, os.WriteFile(dir, []byte("a file"), 0o644))
		}, args: []string{"destroy", "cluster"}, code: 2, msg: "is not a directory"},
		{name: "duplicate-key-install-config", prepare: "install-config", args: []string{"create", "manifests"}, code: 2,
			msg: "install-config.yaml: metadata: Duplicate value: set twice, at line 2 and again at line 7"},
		// Edited or added manifests and static pods.
		{name: "invalid-yaml-manifest", prepare: "manifests", args: []string{"create", "manifests"}, code: 2, msg: "manifests/11-coredns.yaml"},
		{name: "unknown-field-manifest", prepare: "manifests", args: []string{"create", "manifests"}, code: 2, msg: "manifests/00-namespaces.yaml"},
		{name: "added-text-file", prepare: "manifests", args: []string{"create", "manifests"}, code: 2, msg: "manifests/notes.txt"},
		{name: "added-manifest-without-kind", prepare: "manifests", args: []string{"create", "manifests"}, code: 2, msg: "manifests/50-x.yaml: no kind"},
		{name: "non-UTF-8 manifest name", prepare: "manifests", spoil: func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "manifests", "50-\xff.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"), 0o644))
		}, args: []string{"create", "ignition-configs"}, code: 2, msg: `"manifests/50-\xff.yaml": the file name is not valid UTF-8`},
		{name: "duplicate-key-manifest", prepare: "manifests", args: []string{"create", "ignition-configs"}, code: 2,
			msg: "manifests/50-x.yaml: spec.size: set twice, at line 6 and again at line 8"},
		{name: "duplicate-key-static-pod", prepare: "manifests", args: []string{"create", "ignition-configs"}, code: 2,
			msg: "static-pods/master/kube-scheduler.yaml: spec.containers[0].image: set twice, at line 10 and again at line 11"},
		{name: "oversized manifest", prepare: "manifests", spoil: func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "manifests", "50-big.yaml"))
			must(t, err)
			must(t, f.Truncate(9<<20)) // sparse
			must(t, f.Close())
		}, args: []string{"create", "ignition-configs"}, code: 2,
			msg: "manifests/50-big.yaml is 9437184 bytes (9.0 MiB), more than the 8388608 bytes (8.0 MiB) kiln reads for a manifest or static pod"},
		{name: "deleted kube-apiserver static pod", prepare: "manifests", spoil: rm("static-pods/master/kube-apiserver.yaml"),
			args: []string{"create", "manifests"}, code: 2, msg: "static-pods/master/kube-apiserver.yaml is missing"},
		{name: "deleted etcd static pod", prepare: "manifests", spoil: rm("static-pods/master/etcd.yaml"),
			args: []string{"create", "manifests"}, code: 2, msg: "remove static-pods/master/ as a whole", absent: "--force-regenerate"},
		{name: "static pod is a directory", prepare: "manifests", spoil: mkdir("static-pods/bootstrap/etcd.yaml"),
			args: []string{"create", "manifests"}, code: 2, msg: "static-pods/bootstrap/etcd.yaml is a directory"},
		// User PKI.
		{name: "garbage-ca-key", prepare: "install-config", args: []string{"create", "ignition-configs"}, code: 2, msg: "tls/root-ca.key", absent: "asn1"},
		{name: "weak-rsa-512-ca", prepare: "install-config", args: []string{"create", "ignition-configs"}, code: 2, msg: "tls/root-ca.key: RSA key of 512 bits", absent: "admin-client"},
		{name: "sha1-ca", prepare: "install-config", args: []string{"create", "ignition-configs"}, code: 2, msg: "tls/root-ca.crt: signed with SHA1-RSA"},
		// Outputs of another cluster, or of a state that is gone, adopted.
		{name: "bootstrap.ign of another cluster", prepare: "install-config", spoil: fromOtherCluster("bootstrap.ign"),
			args: []string{"create", "ignition-configs"}, code: 2, msg: "bootstrap.ign: /etc/",
			more: []string{`does not chain to this cluster's CAs (tls/root-ca, tls/etcd-ca, tls/front-proxy-ca, tls/kubelet-serving-ca)`, "more items of it disagree too"}},
		{name: "metadata.json of another cluster", prepare: "install-config", spoil: fromOtherCluster("metadata.json"),
			args: []string{"create", "ignition-configs"}, code: 2, msg: `metadata.json: clusterID: clusterID is "`},
		{name: "outputs of a lost state", prepare: "ignition-configs", spoil: func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ".kiln_state.json")))
			b, err := os.ReadFile(filepath.Join(dir, ".kiln", "consumed", "install-config.yaml"))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(dir, "install-config.yaml"), b, 0o600))
		}, args: []string{"create", "ignition-configs"}, code: 2, msg: "bootstrap.ign: /etc/",
			more: []string{"master.ign: ignition.security.tls.certificateAuthorities[0]: certificate \"kiln-root-ca\" does not chain to this cluster's CAs",
				"auth/kubeconfig: clusters[0].cluster.certificate-authority-data", "metadata.json: clusterID"}},
		// Edited outputs and corrupt state.
		{name: "edited-bootstrap-ign", prepare: "ignition-configs", args: []string{"create", "ignition-configs"}, code: 2, msg: "bootstrap.ign"},
		{name: "corrupt-state", prepare: "ignition-configs", args: []string{"create", "ignition-configs"}, code: 2, msg: ".kiln_state.json"},
		// A CA key in the state file garbled or swapped, and a leaf to issue
		// again with it (its entry removed).
		{name: "state root CA key garbled", prepare: "ignition-configs", spoil: editState(func(a map[string]map[string]any) {
			a["tls/root-ca"]["value"].(map[string]any)["key"] = base64.StdEncoding.EncodeToString([]byte("-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n"))
			delete(a, "tls/admin-client")
		}), args: []string{"create", "ignition-configs"}, code: 2,
			msg: `the value of asset tls/root-ca is damaged (the private key of "kiln-root-ca" does not parse`},
		{name: "state root CA key swapped", prepare: "ignition-configs", spoil: editState(func(a map[string]map[string]any) {
			a["tls/root-ca"]["value"].(map[string]any)["key"] = a["tls/etcd-ca"]["value"].(map[string]any)["key"]
			delete(a, "tls/admin-client")
		}), args: []string{"create", "ignition-configs"}, code: 2,
			msg: `the value of asset tls/root-ca is damaged (the private key does not belong to the certificate "kiln-root-ca"`},
		{name: "metadata-garbage", prepare: "ignition-configs", args: []string{"destroy", "cluster"}, code: 2, msg: "metadata.json"},
		{name: "metadata is a directory", prepare: "ignition-configs", spoil: mkdir("metadata.json"),
			args: []string{"destroy", "cluster"}, code: 2, msg: "metadata.json"},
		{name: "kubeconfig deleted", prepare: "ignition-configs", spoil: rm("auth/kubeconfig"),
			args: []string{"wait-for", "install-complete"}, code: 2, msg: "auth/kubeconfig", absent: "stat "},
		// Commands refused before they start.
		{name: "unknown create target", prepare: "install-config", args: []string{"create", "clusterz"}, code: 2, msg: `unknown command "clusterz"`},
		{name: "unknown show target", prepare: "ignition-configs", args: []string{"show", "nonsense"}, code: 2, msg: `unknown command "nonsense"`},
		{name: "extra argument", prepare: "install-config", args: []string{"create", "manifests", "extra"}, code: 2, msg: `"extra"`},
		{name: "negative timeout", prepare: "install-config", args: []string{"create", "cluster", "--install-timeout=-1m", "--api-timeout=1ms"}, code: 2, msg: "--install-timeout -1m0s"},
		{name: "negative wait-for timeout", prepare: "ignition-configs", args: []string{"wait-for", "bootstrap-complete", "--bootstrap-timeout=-1s", "--api-timeout=1ms"}, code: 2, msg: "--bootstrap-timeout"},
		{name: "wait-for without configs", args: []string{"wait-for", "install-complete"}, code: 2, msg: "no Ignition configs", absent: "stat "},
		{name: "gather in an empty dir", args: []string{"gather", "bootstrap"}, code: 2, msg: "nothing to gather", absent: "destroy"},
		{name: "destroy with nothing to destroy", args: []string{"destroy", "cluster"}, code: 0, msg: "nothing to destroy"},
		// Commands that never touch a directory.
		{name: "version in the current directory", args: []string{"version"}, inCwd: true},
		{name: "explain in the current directory", args: []string{"explain", "installconfig"}, inCwd: true},
		{name: "graph in the current directory", args: []string{"graph"}, inCwd: true},
		{name: "bare create in the current directory", args: []string{"create"}, inCwd: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			area := t.TempDir()
			dir := filepath.Join(area, "dir")
			prepared(t, tc.prepare, dir)
			if corpus := filepath.Join("testdata", "hostile", tc.name); isDir(corpus) {
				copyTree(t, corpus, dir)
			}
			if tc.spoil != nil {
				tc.spoil(t, dir)
			}
			before := atomicfiletest.Tree(t, area)
			args := tc.args
			if tc.inCwd {
				t.Chdir(dir)
			} else {
				args = append(slices.Clone(args), "--dir", dir)
			}
			var out, errb bytes.Buffer
			o := &rootOptions{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
			code := execute(context.Background(), o, args)
			stderr := errb.String()
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.msg) || (tc.absent != "" && strings.Contains(stderr, tc.absent)) {
				t.Errorf("stderr does not say %q (or says %q):\n%s", tc.msg, tc.absent, stderr)
			}
			for _, m := range tc.more {
				if !strings.Contains(stderr, m) {
					t.Errorf("stderr does not say %q:\n%s", m, stderr)
				}
			}
			if after := atomicfiletest.Tree(t, area); !maps.Equal(before, after) {
				t.Errorf("the directory changed:\n%s", diffSnapshots(before, after))
			}
		})
	}
}

// prepared fills dir with what kiln creates for target from
// hostileInstallConfig ("" leaves it empty).
func prepared(t *testing.T, target, dir string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	if target == "" {
		return
	}
	src := filepath.Join(t.TempDir(), "src")
	must(t, os.MkdirAll(src, 0o755))
	for _, step := range []string{"install-config", "manifests", "ignition-configs"} {
		var errb bytes.Buffer
		o := &rootOptions{stdin: strings.NewReader(hostileInstallConfig), stdout: &bytes.Buffer{}, stderr: &errb}
		if code := execute(context.Background(), o, []string{"create", step, "--dir", src}); code != 0 {
			t.Fatalf("create %s: exit %d\n%s", step, code, errb.String())
		}
		if step == target {
			break
		}
	}
	copyTree(t, src, dir)
}

// fromOtherCluster returns a spoil that copies file from a --dir kiln
// prepared for another cluster, from the same install-config.
func fromOtherCluster(file string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		other := filepath.Join(t.TempDir(), "other")
		prepared(t, "ignition-configs", other)
		b, err := os.ReadFile(filepath.Join(other, file))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, file), b, 0o600))
	}
}

// editState returns a spoil that changes the assets of dir's state file.
func editState(edit func(assets map[string]map[string]any)) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		name := filepath.Join(dir, ".kiln_state.json")
		b, err := os.ReadFile(name)
		must(t, err)
		var st struct {
			Version int                       `json:"version"`
			Assets  map[string]map[string]any `json:"assets"`
		}
		must(t, json.Unmarshal(b, &st))
		edit(st.Assets)
		b, err = json.Marshal(st)
		must(t, err)
		must(t, os.WriteFile(name, b, 0o600))
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// copyTree copies the regular files and folders under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	must(t, err)
}

func diffSnapshots(before, after map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if a, ok := after[k]; !ok {
			fmt.Fprintf(&b, "removed %s\n", k)
		} else if a != before[k] {
			fmt.Fprintf(&b, "changed %s\n", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			fmt.Fprintf(&b, "added %s\n", k)
		}
	}
	return b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
