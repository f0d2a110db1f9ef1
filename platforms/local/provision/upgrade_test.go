package provision

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
)

func TestRestartKubeletArgv(t *testing.T) {
	if got, want := restartKubeletArgv(), []string{"systemctl", "restart", "kubelet.service"}; !slices.Equal(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
}

func TestUpgraderRefusesWhatIsNotANodeOrNotBuilt(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	p := &Provisioner{StateRoot: t.TempDir(), Env: platforms.Env{Log: log, Progress: platforms.NoProgress{}, CacheDir: t.TempDir()}}
	ctx := context.Background()
	for name, err := range map[string]error{
		"load into the bootstrap machine": p.LoadRelease(ctx, "demo-x1", "demo-x1-bootstrap", "v1.36.3", []release.Component{release.KubeAPIServer}),
		"kubelet of another cluster":      p.InstallKubelet(ctx, "demo-x1", "other-y2-master-0", "v1.36.3"),
		"write on a host":                 p.WriteNodeFile(ctx, "demo-x1", "localhost", "/etc/hosts", nil, 0o644),
	} {
		if err == nil || !strings.Contains(err.Error(), "is not a node of cluster demo-x1") {
			t.Errorf("%s: %v", name, err)
		}
	}
	err := p.InstallKubelet(ctx, "demo-x1", "demo-x1-worker-0", "v1.35.4")
	if err == nil || !strings.Contains(err.Error(), "kiln build node-image --kubernetes-version v1.35.4") {
		t.Errorf("an image not in the cache: %v", err)
	}
	if err := p.LoadRelease(ctx, "demo-x1", "demo-x1-worker-0", "v1.20.0", nil); err == nil || !strings.Contains(err.Error(), "kiln installs Kubernetes") {
		t.Errorf("an unknown release: %v", err)
	}
}
