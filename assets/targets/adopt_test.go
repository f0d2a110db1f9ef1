package targets

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/internal/adopted"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// create runs the targets into dir, from config.
func create(t *testing.T, dir string, targets ...graph.Target) error {
	t.Helper()
	ctx := installconfig.WithInput(context.Background(), installconfig.Input{In: strings.NewReader(config)})
	for _, tg := range targets {
		s, err := graph.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(ctx, tg); err != nil {
			return err
		}
	}
	return nil
}

// forget removes assets from dir's state file, so that their files in dir
// are adopted by the next run as if the user had put them there.
func forget(t *testing.T, dir string, ids ...string) {
	t.Helper()
	name := filepath.Join(dir, installdir.State)
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var st graph.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if st.Assets[id] == nil {
			t.Fatalf("no %s in the state", id)
		}
		delete(st.Assets, id)
	}
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Every file kiln writes passes the check it gets when it is adopted into
// the cluster it was made for.
func TestOwnFilesAreAdopted(t *testing.T) {
	dir := t.TempDir()
	if err := create(t, dir, InstallConfig(), Manifests()); err != nil {
		t.Fatal(err)
	}
	forget(t, dir, "manifests/cluster-config", "manifests/namespaces", "manifests/kube-proxy")
	if err := create(t, dir, Manifests(), IgnitionConfigs()); err != nil {
		t.Fatalf("kiln's own manifests were refused: %v", err)
	}
	forget(t, dir, "ignition/bootstrap", "ignition/master", "ignition/worker", "kubeconfig/admin", "metadata")
	if err := create(t, dir, IgnitionConfigs()); err != nil {
		t.Fatalf("kiln's own outputs were refused: %v", err)
	}
}

// A file of another cluster put into --dir is refused, naming it: it holds
// certificates of another CA or names another infra ID.
func TestOtherClustersFilesAreRefused(t *testing.T) {
	other := t.TempDir()
	if err := create(t, other, InstallConfig(), Manifests()); err != nil {
		t.Fatal(err)
	}
	otherManifest, err := os.ReadFile(filepath.Join(other, "manifests", "03-cluster-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := create(t, other, IgnitionConfigs()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file   string
		target graph.Target
		data   []byte // default: other's file
		item   string // where in the file the first mismatch is; "" for anywhere
	}{
		{file: "bootstrap.ign", target: IgnitionConfigs()},
		{file: "master.ign", target: IgnitionConfigs(), item: "ignition.security.tls.certificateAuthorities[0]"},
		{file: "worker.ign", target: IgnitionConfigs(), item: "ignition.security.tls.certificateAuthorities[0]"},
		{file: "auth/kubeconfig", target: IgnitionConfigs(), item: "clusters[0].cluster.certificate-authority-data"},
		{file: "metadata.json", target: IgnitionConfigs(), item: "clusterID"},
		{file: "manifests/03-cluster-config.yaml", target: Manifests(), data: otherManifest, item: "data.infraID"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			dir := t.TempDir()
			if err := create(t, dir, InstallConfig()); err != nil {
				t.Fatal(err)
			}
			data := tc.data
			if data == nil {
				var err error
				if data, err = os.ReadFile(filepath.Join(other, tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, tc.file)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, tc.file), data, 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			err := create(t, dir, tc.target)
			var me *adopted.MismatchError
			if !graph.IsInputError(err) || !errors.As(err, &me) || me.File != tc.file || (tc.item != "" && me.Item != tc.item) {
				t.Fatalf("err = %v; want an input error naming %s (item %q)", err, tc.file, tc.item)
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("--dir changed")
			}
		})
	}
}
