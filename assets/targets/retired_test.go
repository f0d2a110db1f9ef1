package targets

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// oldPassword is the kubeadmin password of the --dir of an earlier kiln.
const oldPassword = "abcde-fghij-kmnop-qrstu"

// oldSecret is the kubeadmin Secret an earlier kiln wrote to manifests/.
const oldSecret = `apiVersion: v1
kind: Secret
metadata:
  namespace: kube-system
  name: kubeadmin
type: Opaque
stringData:
  passwordHash: $2a$06$abcdefghijklmnopqrstuu
`

// persistAll opens a store of dir as `kiln create` does and writes each
// target; it returns the last store.
func persistAll(t *testing.T, dir string, tgs ...graph.Target) *graph.Store {
	t.Helper()
	ctx := installconfig.WithInput(context.Background(), installconfig.Input{In: strings.NewReader(config)})
	var s *graph.Store
	for _, tg := range tgs {
		var err error
		if s, err = graph.Open(dir, graph.WithRetired(Retired()...)); err != nil {
			t.Fatal(err)
		}
		if err := s.Persist(ctx, tg); err != nil {
			t.Fatalf("%s: %v", tg.Name, err)
		}
	}
	return s
}

// ageState makes dir's state file look like an earlier kiln's: it adds the
// retired kubeadmin assets, and makes each asset named in dependents depend
// on the kubeadmin Secret, as bootstrap.ign did.
func ageState(t *testing.T, dir string, dependents ...string) {
	t.Helper()
	st, err := graph.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := json.Marshal(map[string]any{
		"passwordHash": []byte("$2a$06$abcdefghijklmnopqrstuu"),
		"file":         graph.File{Path: "auth/kubeadmin-password", Data: []byte(oldPassword), Mode: 0o600},
	})
	if err != nil {
		t.Fatal(err)
	}
	st.Assets["password/kubeadmin"] = &graph.StateEntry{Hash: "h-pw", Value: pw,
		Disk: map[string]string{"auth/kubeadmin-password": "h-pw-file"}}
	st.Assets["manifests/kubeadmin"] = &graph.StateEntry{Hash: "h-secret", Value: json.RawMessage(`{}`),
		Parents: map[string]string{"password/kubeadmin": "h-pw"}}
	for _, id := range dependents {
		st.Assets[id].Parents["manifests/kubeadmin"] = "h-secret"
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, installdir.State), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to name in dir with mode 0600.
func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkRetired fails unless dir's state file has shed the kubeadmin assets.
func checkRetired(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, installdir.State))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(Retired(), oldPassword, base64.StdEncoding.EncodeToString([]byte(oldPassword))) {
		if strings.Contains(string(raw), s) {
			t.Errorf("the state file still holds %q", s)
		}
	}
}

// A --dir whose Ignition configs an earlier kiln made (its state holds the
// kubeadmin password and Secret, bootstrap.ign depended on the Secret)
// resumes with nothing regenerated and every file as it was, the state
// file sheds the password, and the user's auth/kubeadmin-password stays.
func TestOldDirWithKubeadminPasswordResumes(t *testing.T) {
	dir := t.TempDir()
	persistAll(t, dir, All()...)
	ageState(t, dir, "ignition/bootstrap")
	writeFile(t, dir, "auth/kubeadmin-password", oldPassword+"\n")
	before := snapshot(t, dir)
	delete(before, filepath.Join(dir, installdir.State))

	s := persistAll(t, dir, IgnitionConfigs())
	if g := s.Generated(); len(g) > 0 {
		t.Errorf("the old --dir regenerated %v, want nothing", g)
	}
	after := snapshot(t, dir)
	delete(after, filepath.Join(dir, installdir.State))
	if !maps.Equal(before, after) {
		t.Errorf("resuming the old --dir changed files besides the state file")
	}
	checkRetired(t, dir)
}

// A --dir an earlier kiln left after `create manifests` still holds its
// manifests/04-kubeadmin.yaml: that file is kiln's, not the user's, so
// bootstrap.ign does not carry it, and it is left where it is.
func TestOldManifestsKubeadminSecretIsNotApplied(t *testing.T) {
	dir := t.TempDir()
	persistAll(t, dir, InstallConfig(), Manifests())
	ageState(t, dir)
	writeFile(t, dir, "manifests/04-kubeadmin.yaml", oldSecret)
	for run := 1; run <= 2; run++ {
		s := persistAll(t, dir, IgnitionConfigs())
		u := &manifests.UserManifests{}
		if err := s.Fetch(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		if len(u.FileList) != 0 {
			t.Errorf("run %d: user manifests %v, want none", run, u.Paths())
		}
		ign, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ign), "kubeadmin") {
			t.Errorf("run %d: bootstrap.ign carries the kubeadmin Secret", run)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "manifests", "04-kubeadmin.yaml")); err != nil || string(b) != oldSecret {
			t.Errorf("run %d: manifests/04-kubeadmin.yaml is now %q (%v); leave it alone", run, b, err)
		}
		checkRetired(t, dir)
	}
}
