package provision

import (
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

func TestStageReleaseRefusesWhatIsNotANodeOrNotBuilt(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	p := &Provisioner{StateRoot: t.TempDir(), Env: platforms.Env{Log: log, Progress: platforms.NoProgress{}, CacheDir: t.TempDir()}}
	ctx := context.Background()
	c := &platforms.Cluster{InfraID: "demo-x1"}
	for name, err := range map[string]error{
		"the bootstrap machine":  p.StageRelease(ctx, c, "demo-x1-bootstrap", "v1.36.3"),
		"another cluster's node": p.StageRelease(ctx, c, "other-y2-master-0", "v1.36.3"),
		"a host":                 p.StageRelease(ctx, c, "localhost", "v1.36.3"),
	} {
		if err == nil || !strings.Contains(err.Error(), "is not a node of cluster demo-x1") {
			t.Errorf("%s: %v", name, err)
		}
	}
	err := p.StageRelease(ctx, c, "demo-x1-worker-0", "v1.35.4")
	if err == nil || !strings.Contains(err.Error(), "kiln build node-image --kubernetes-version v1.35.4") {
		t.Errorf("an image not in the cache: %v", err)
	}
	if err := p.StageRelease(ctx, c, "demo-x1-worker-0", "v1.20.0"); err == nil || !strings.Contains(err.Error(), "kiln installs Kubernetes") {
		t.Errorf("an unknown release: %v", err)
	}
}

func TestPayloadFiles(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"/usr/local/bin/kubelet", path.Join(nodeimage.ImagesDir, "etcd.tar"), path.Join(nodeimage.ImagesDir, "pause.tar"), path.Join(nodeimage.ImagesDir, "import.sh")} {
		full := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := payloadFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		nodelayout.PayloadKubelet:                  filepath.Join(root, "usr/local/bin/kubelet"),
		nodelayout.PayloadImagesDir + "/etcd.tar":  filepath.Join(root, nodeimage.ImagesDir, "etcd.tar"),
		nodelayout.PayloadImagesDir + "/pause.tar": filepath.Join(root, nodeimage.ImagesDir, "pause.tar"),
	}
	if len(files) != len(want) {
		t.Errorf("files %v, want %v", files, want)
	}
	for k, v := range want {
		if files[k] != v {
			t.Errorf("%s: %q, want %q", k, files[k], v)
		}
	}
}
