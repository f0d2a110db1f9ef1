package etcdmember

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-project/kiln/cmd/cluster/etcdmembers"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// voterPoll is how often the installer asks the local member whether it
// votes yet: a local status call, and the master's control plane starts
// only after the answer.
const voterPoll = 500 * time.Millisecond

// Install is the installer pod's work on a master: write the member's
// certificates and static pod from fromDir into kubeDir, wait until the local
// member is a voter, then activate the staged control plane static pods.
func Install(ctx context.Context, fromDir, kubeDir string, log logrus.FieldLogger) error {
	files := map[string][]byte{}
	for _, name := range []string{etcdmembers.CACert, etcdmembers.ServerCert, etcdmembers.ServerKey, etcdmembers.PeerCert, etcdmembers.PeerKey} {
		data, err := os.ReadFile(filepath.Join(fromDir, name))
		if err != nil {
			return err
		}
		files[name] = data
	}
	manifest, err := os.ReadFile(filepath.Join(fromDir, etcdmembers.ManifestFile))
	if err != nil {
		return err
	}
	pki := filepath.Join(kubeDir, nodelayout.EtcdPKISubdir)
	if err := WriteFiles(pki, files); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(kubeDir, nodelayout.StaticPodsSubdir, etcdmembers.ManifestFile), manifest, 0o644); err != nil {
		return err
	}
	log.Info("etcd member files installed; waiting for the member to vote")
	c, err := etcdmembers.Dial([]string{"https://127.0.0.1:2379"}, filepath.Join(pki, etcdmembers.CACert),
		filepath.Join(pki, etcdmembers.ServerCert), filepath.Join(pki, etcdmembers.ServerKey))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := wait.PollUntilContextCancel(ctx, voterPoll, true, func(ctx context.Context) (bool, error) {
		st, err := c.Status(ctx, "https://127.0.0.1:2379")
		return err == nil && !st.IsLearner, nil
	}); err != nil {
		return fmt.Errorf("etcd member did not become a voter: %w", err)
	}
	return ActivateStaged(kubeDir, log)
}

// ActivateStaged moves every staged static pod into the kubelet's manifests.
// The files were written whole when staged, so a rename moves each one
// atomically; the directories are synced so the moves survive a power loss.
func ActivateStaged(kubeDir string, log logrus.FieldLogger) error {
	staged := filepath.Join(kubeDir, nodelayout.StagedPodsSubdir)
	entries, err := os.ReadDir(staged)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.Rename(filepath.Join(staged, e.Name()), filepath.Join(kubeDir, nodelayout.StaticPodsSubdir, e.Name())); err != nil {
			return err
		}
		log.Infof("activated static pod %s", e.Name())
	}
	if len(entries) == 0 {
		return nil
	}
	if err := atomicfile.SyncDir(filepath.Join(kubeDir, nodelayout.StaticPodsSubdir)); err != nil {
		return err
	}
	return atomicfile.SyncDir(staged)
}
