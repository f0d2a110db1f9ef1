package infra

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile/atomicfiletest"
	"github.com/kiln-project/kiln/platforms"
)

func TestFindTarget(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindTarget(dir, ""); !errors.Is(err, ErrNothingToDestroy) {
		t.Fatalf("empty dir, no --infra-id: %v", err)
	}
	if tg, err := FindTarget(dir, "demo-ab12c"); err != nil || tg != (Target{InfraID: "demo-ab12c", Platform: "local"}) {
		t.Fatalf("--infra-id only: %+v %v", tg, err)
	}
	os.WriteFile(filepath.Join(dir, "metadata.json"), []byte(`{"clusterName":"demo","infraID":"demo-xyz12","platform":"local","local":{}}`), 0o644)
	if tg, err := FindTarget(dir, ""); err != nil || tg.InfraID != "demo-xyz12" {
		t.Fatalf("metadata: %+v %v", tg, err)
	}
	if _, err := FindTarget(dir, "other-11111"); exitcode.Of(err) != exitcode.Input {
		t.Fatalf("mismatched --infra-id accepted: %v", err)
	}
}

type fakeProv struct {
	platforms.Provisioner
	destroyed string
	err       error
}

func (f *fakeProv) Destroy(_ context.Context, _, infraID string) error {
	f.destroyed = infraID
	return f.err
}

func TestDestroyCleansDirOnlyAfterSuccess(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o600)
	}
	for _, p := range []string{".kiln_state.json", "metadata.json", "bootstrap.ign", "auth/kubeconfig", ".kiln/terraform/network/terraform.tfstate"} {
		write(p, "x")
	}
	write(".kiln/consumed/install-config.yaml", "apiVersion: kiln.dev/v1\n")
	write(".kiln.log", "log")
	log := logrus.New()
	log.SetOutput(io.Discard)

	failing := &fakeProv{err: errors.New("bridge busy")}
	if err := Destroy(context.Background(), dir, Target{InfraID: "demo-1"}, failing, log); err == nil {
		t.Fatal("failed destroy reported success")
	}
	if _, err := os.Stat(filepath.Join(dir, ".kiln/terraform/network/terraform.tfstate")); err != nil {
		t.Fatal("a failed destroy removed the Terraform state it needs to retry")
	}
	ok := &fakeProv{}
	if err := Destroy(context.Background(), dir, Target{InfraID: "demo-1"}, ok, log); err != nil || ok.destroyed != "demo-1" {
		t.Fatalf("destroy: %v (%q)", err, ok.destroyed)
	}
	for _, p := range []string{".kiln_state.json", "metadata.json", "bootstrap.ign", "auth", ".kiln/terraform"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s left after destroy", p)
		}
	}
	for _, p := range []string{".kiln.log", "install-config.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s should be there after destroy: %v", p, err)
		}
	}
}

// A cluster whose metadata.json was lost is still found through the state file.
func TestFindTargetFromState(t *testing.T) {
	dir := t.TempDir()
	ic, err := os.ReadFile("../../../assets/ignitionconfigs/testdata/install-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "install-config.yaml"), ic, 0o600)
	log := logrus.New()
	log.SetOutput(io.Discard)
	store, err := graph.Open(dir, graph.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Persist(context.Background(), targets.IgnitionConfigs()); err != nil {
		t.Fatal(err)
	}
	want, err := FindTarget(dir, "")
	if err != nil || want.Platform != "local" || !strings.HasPrefix(want.InfraID, "demo-") {
		t.Fatalf("with metadata.json: %+v %v", want, err)
	}
	os.Remove(filepath.Join(dir, "metadata.json"))
	got, err := FindTarget(dir, "")
	if err != nil || got != want {
		t.Fatalf("without metadata.json: %+v %v, want %+v", got, err, want)
	}
}

// TestDestroyRemovesLinksNotTargets: a generated path that is a link (auth/)
// is removed by destroy, and what it pointed to is left alone; an
// install-config.yaml that is a (dangling) link is not restored through.
func TestDestroyRemovesLinksNotTargets(t *testing.T) {
	area := t.TempDir()
	dir, outside := filepath.Join(area, "dir"), filepath.Join(area, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "kubeconfig"), []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "auth")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "new"), filepath.Join(dir, "install-config.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".kiln/consumed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".kiln/consumed/install-config.yaml"), []byte("ic"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := atomicfiletest.Tree(t, outside)
	log := logrus.New()
	log.SetOutput(io.Discard)
	if err := Destroy(context.Background(), dir, Target{InfraID: "demo-1"}, &fakeProv{}, log); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "auth")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("auth is still there: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "install-config.yaml")); err != nil || target != filepath.Join(outside, "new") {
		t.Errorf("install-config.yaml link changed: %q %v", target, err)
	}
	if after := atomicfiletest.Tree(t, outside); !maps.Equal(before, after) {
		t.Errorf("outside --dir changed:\nbefore %v\nafter  %v", before, after)
	}
}
