package ignitionconfigs_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

const myNamespace = `apiVersion: v1
kind: Namespace
metadata:
  name: my-namespace
`

const myConfigMaps = `# two objects, one a custom resource kiln's scheme does not know
apiVersion: v1
kind: ConfigMap
metadata:
  name: early
  namespace: default
data:
  a: b
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
`

// snapshotDir maps every file under dir to its content.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// manifestsIn lists the files bootkube applies (kubectl apply -f takes a
// directory's files in name order) and returns the config.
func manifestsIn(t *testing.T, dir string) ([]string, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range parse(t, raw).Storage.Files {
		if d, base := filepath.Split(f.Path); d == "/opt/kiln/manifests/" {
			names = append(names, base)
		}
	}
	slices.Sort(names)
	return names, raw
}

// D6b: a manifest the user adds after `create manifests` lands in
// bootstrap.ign beside kiln's, applied in file-name order, and is named in
// the list bootkube logs; it stays in after manifests/ was consumed.
func TestUserManifestsInBootstrap(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.Manifests())
	writeFile(t, dir, "manifests/50-my-namespace.yaml", myNamespace)
	writeFile(t, dir, "manifests/05-early.yaml", myConfigMaps)
	writeFile(t, dir, "manifests/.50-my-namespace.yaml.swp", "editor junk")
	persist(t, dir, targets.IgnitionConfigs())

	want := []string{
		"00-namespaces.yaml", "01-rbac-node-bootstrap.yaml", "02-bootstrap-token.yaml", "03-cluster-config.yaml",
		"05-early.yaml", "05-machines.yaml", "06-kubelet-serving-ca.yaml", "10-kube-proxy.yaml", "11-coredns.yaml", "12-csr-approver.yaml", "13-local-path-storage.yaml", "14-metrics-server.yaml", "15-network-policy.yaml", "17-machine-config.yaml", "50-my-namespace.yaml",
	}
	for run := 1; run <= 2; run++ { // the second run finds manifests/ consumed
		names, raw := manifestsIn(t, dir)
		if !slices.Equal(names, want) {
			t.Fatalf("run %d: bootkube applies %v, want %v", run, names, want)
		}
		cfg := parse(t, raw)
		got, _, _ := ignition.FileContents(cfg, "/opt/kiln/manifests/50-my-namespace.yaml")
		if string(got) != myNamespace {
			t.Errorf("run %d: 50-my-namespace.yaml in bootstrap.ign = %q", run, got)
		}
		list, ok, _ := ignition.FileContents(cfg, nodelayout.BootstrapUserManifestsList)
		if !ok || string(list) != "manifests/05-early.yaml\nmanifests/50-my-namespace.yaml\n" {
			t.Errorf("run %d: %s = %q, %v", run, nodelayout.BootstrapUserManifestsList, list, ok)
		}
		if _, err := os.Stat(filepath.Join(dir, installdir.Consumed, "manifests/50-my-namespace.yaml")); err != nil {
			t.Errorf("run %d: the added manifest was not consumed like kiln's: %v", run, err)
		}
		persist(t, dir, targets.IgnitionConfigs())
	}
}

// A user manifest deleted before ignition-configs is dropped, even though
// an earlier `create manifests` recorded it.
func TestDeletedUserManifestIsDropped(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.Manifests())
	writeFile(t, dir, "manifests/50-my-namespace.yaml", myNamespace)
	persist(t, dir, targets.Manifests())
	if err := os.Remove(filepath.Join(dir, "manifests/50-my-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	persist(t, dir, targets.IgnitionConfigs())
	if names, _ := manifestsIn(t, dir); slices.Contains(names, "50-my-namespace.yaml") {
		t.Errorf("a deleted manifest is still applied: %v", names)
	}
}

// D6: edited or added manifests and static pods are decoded on load; a bad
// one is an input error naming the file, and nothing is written.
func TestCheckedManifests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(t *testing.T, dir string)
		inMsg  []string
		isFile bool // a *manifests.FileError
	}{
		{"invalid YAML in kiln's manifest", func(t *testing.T, dir string) {
			writeFile(t, dir, "manifests/11-coredns.yaml", "kind: ConfigMap\n  data: [\n")
		}, []string{"manifests/11-coredns.yaml"}, true},
		{"unknown field in kiln's manifest", func(t *testing.T, dir string) {
			writeFile(t, dir, "manifests/00-namespaces.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\nspek: {}\n")
		}, []string{"manifests/00-namespaces.yaml", "spek"}, true},
		{"added manifest without kind", func(t *testing.T, dir string) {
			writeFile(t, dir, "manifests/50-x.yaml", "apiVersion: v1\nmetadata:\n  name: x\n")
		}, []string{"manifests/50-x.yaml", "no kind"}, true},
		{"second document of an added manifest", func(t *testing.T, dir string) {
			writeFile(t, dir, "manifests/50-x.yaml", myNamespace+"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: 3\n")
		}, []string{"manifests/50-x.yaml: document 2"}, true},
		{"added file kubectl would skip", func(t *testing.T, dir string) {
			writeFile(t, dir, "manifests/notes.txt", "hello")
		}, []string{"manifests/notes.txt", ".yaml"}, true},
		{"static pod that is not a Pod", func(t *testing.T, dir string) {
			writeFile(t, dir, "static-pods/bootstrap/kube-scheduler.yaml", myNamespace)
		}, []string{"static-pods/bootstrap/kube-scheduler.yaml", "not a Pod"}, true},
		{"static pod with a typo", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "static-pods/master/kube-apiserver.yaml")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "static-pods/master/kube-apiserver.yaml", strings.Replace(string(data), "containers:", "contianers:", 1))
		}, []string{"static-pods/master/kube-apiserver.yaml", "contianers"}, true},
		{"deleted kube-apiserver", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "static-pods/master/kube-apiserver.yaml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"static-pods/master/kube-apiserver.yaml is missing", "remove static-pods/master/"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newDir(t)
			persist(t, dir, targets.Manifests())
			tc.edit(t, dir)
			store, err := graph.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, dir)
			err = store.Persist(context.Background(), targets.IgnitionConfigs())
			if !graph.IsInputError(err) {
				t.Fatalf("error %v is not an input error", err)
			}
			for _, s := range tc.inMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			var fe *manifests.FileError
			if errors.As(err, &fe) != tc.isFile {
				t.Errorf("error %v: FileError %v, want %v", err, !tc.isFile, tc.isFile)
			}
			if after := snapshotDir(t, dir); !maps.Equal(before, after) {
				t.Error("--dir changed")
			}
		})
	}
}

// D7: the advice for a deleted masters' etcd.yaml works when followed.
func TestDeletedEtcdAdviceWorks(t *testing.T) {
	dir := newDir(t)
	persist(t, dir, targets.Manifests())
	if err := os.Remove(filepath.Join(dir, "static-pods/master/etcd.yaml")); err != nil {
		t.Fatal(err)
	}
	store, err := graph.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = store.Persist(context.Background(), targets.IgnitionConfigs())
	if err == nil || !strings.Contains(err.Error(), "static-pods/master/etcd.yaml is missing") ||
		!strings.Contains(err.Error(), "remove static-pods/master/ as a whole") {
		t.Fatalf("error = %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "static-pods/master")); err != nil {
		t.Fatal(err)
	}
	persist(t, dir, targets.IgnitionConfigs())
	raw, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ignition.FileContents(parse(t, raw), "/opt/kiln/static-pods/etcd.yaml"); !ok {
		t.Error("bootstrap.ign has no masters' etcd.yaml after following the advice")
	}
}
