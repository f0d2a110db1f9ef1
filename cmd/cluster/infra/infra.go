// Package infra acts on a cluster's infrastructure through its provisioner
// alone, without the cluster's API: it finds the cluster --dir names
// (Target: metadata.json, the state file, or --infra-id), destroys it and
// cleans --dir of what kiln generated, gathers its machines' logs, and
// loads images into its nodes.
package infra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/assets/metadata"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
)

// ErrNoMetadata is returned when nothing names the cluster to destroy.
var ErrNoMetadata = errors.New("no metadata.json in --dir: pass --infra-id <id> (the cluster's machines are named <id>-bootstrap, <id>-master-0, ...)")

// ErrNothingToDestroy is returned when --dir holds no cluster: it was never
// created there or is already destroyed.
var ErrNothingToDestroy = errors.New("no cluster in --dir (no metadata.json and no kiln state): nothing to destroy; pass --infra-id <id> to remove a cluster created elsewhere")

// Target names the cluster a destroy removes.
type Target struct {
	InfraID  string
	Platform string
}

// FindTarget reads metadata.json in dir; infraID, when set, wins (it is
// how a cluster whose metadata.json was lost is destroyed, by its machines'
// names, on the default platform).
func FindTarget(dir, infraID string) (Target, error) {
	data, err := graph.ReadFile(dir, installdir.Metadata, graph.OtherInput)
	if errors.Is(err, fs.ErrNotExist) {
		if infraID != "" {
			return Target{InfraID: infraID, Platform: configs.Default()}, nil
		}
		return targetFromState(dir)
	}
	if err != nil {
		return Target{}, exitcode.With(exitcode.Input, err)
	}
	m, err := metadata.Parse(data)
	if err != nil {
		return Target{}, exitcode.With(exitcode.Input, err)
	}
	t := Target{InfraID: m.InfraID, Platform: m.PlatformName}
	if infraID != "" && infraID != m.InfraID {
		return Target{}, exitcode.With(exitcode.Input, fmt.Errorf("--infra-id %s does not match %s's infraID %s", infraID, installdir.Metadata, m.InfraID))
	}
	return t, nil
}

// Destroy destroys the cluster and, once that succeeded, removes what kiln
// generated in dir, so the same --dir can create a new cluster: the state
// file, metadata.json, the Ignition configs, auth/ and kiln's Terraform
// state. install-config.yaml is put back from .kiln/consumed if it was
// consumed; the debug log and .kiln/consumed stay.
func Destroy(ctx context.Context, dir string, t Target, prov platforms.Provisioner, log logrus.FieldLogger) error {
	if err := prov.Destroy(ctx, dir, t.InfraID); err != nil {
		return exitcode.With(exitcode.Infrastructure, err)
	}
	return cleanDir(dir, log)
}

// cleanDir puts install-config.yaml back and removes what kiln generated,
// following no symbolic link in dir: a link among the generated paths is
// removed itself, never what it points to.
func cleanDir(dir string, log logrus.FieldLogger) error {
	w := &atomicfile.Writer{Root: dir}
	ic := filepath.Join(dir, installdir.InstallConfig)
	consumed := installdir.Consumed + "/" + installdir.InstallConfig
	if _, err := os.Lstat(ic); errors.Is(err, fs.ErrNotExist) {
		if data, err := graph.ReadFile(dir, consumed, graph.InstallConfigInput); err == nil {
			if err := w.Write(ic, data, 0o600); err != nil {
				return err
			}
			log.Infof("Restored install-config.yaml from %s", consumed)
		}
	}
	var errs []error
	for _, p := range installdir.RemovedByDestroy() {
		if err := w.RemoveAll(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// targetFromState names the cluster from the state file when metadata.json
// is gone: the cluster ID and install-config are kept there.
func targetFromState(dir string) (Target, error) {
	cid, ic, err := Identity(dir)
	if err != nil {
		return Target{}, err
	}
	return Target{InfraID: cid.InfraID, Platform: ic.Config.PlatformName()}, nil
}

// Identity reads the cluster ID and install-config kept in dir's
// state file: ErrNothingToDestroy when dir has no state file, ErrNoMetadata
// (an input error) when the state lacks either.
func Identity(dir string) (*clusterid.ClusterID, *installconfig.InstallConfig, error) {
	if _, err := os.Stat(filepath.Join(dir, installdir.State)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNothingToDestroy
	}
	store, err := graph.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	cid, ic := &clusterid.ClusterID{}, &installconfig.InstallConfig{}
	for _, a := range []graph.Asset{cid, ic} {
		if ok, err := store.FromState(a); err != nil || !ok {
			return nil, nil, exitcode.With(exitcode.Input, ErrNoMetadata)
		}
	}
	return cid, ic, nil
}
