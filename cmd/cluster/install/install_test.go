package install

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/platforms"
)

func TestTimeouts(t *testing.T) {
	cfg := types.ResolvedTimeouts{API: 5 * time.Minute, Bootstrap: 45 * time.Minute, Install: 30 * time.Minute}
	got, err := timeouts(cfg, Timeouts{API: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := Timeouts{API: time.Minute, Bootstrap: 45 * time.Minute, Install: 30 * time.Minute}
	if got != want {
		t.Fatalf("timeouts = %+v, want %+v (flags win over install-config)", got, want)
	}
	if _, err := timeouts(cfg, Timeouts{Install: -time.Minute}); exitcode.Of(err) != exitcode.Input || !strings.Contains(err.Error(), "--install-timeout") {
		t.Fatalf("negative flag: %v", err)
	}
}

func TestCheckCredentials(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &Cluster{TokenExpiry: now.Add(13 * time.Hour)}
	if err := c.checkCredentials(now); err != nil {
		t.Fatalf("13 h left refused: %v", err)
	}
	c.TokenExpiry = now.Add(11 * time.Hour)
	err := c.checkCredentials(now)
	if err == nil || !strings.Contains(err.Error(), "too old") {
		t.Fatalf("11 h left: %v", err)
	}
}

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
