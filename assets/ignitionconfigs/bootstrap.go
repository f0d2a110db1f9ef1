package ignitionconfigs

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/kubeconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/tls"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

var _ graph.WritableAsset = (*Bootstrap)(nil)

// BootstrapFile is the bootstrap machine's config in --dir. It holds private
// keys: mode 0600.
const BootstrapFile = "bootstrap.ign"

// Bootstrap is bootstrap.ign: the temporary control plane as static pods,
// bootkube with every manifest to apply, and the machine-config server with
// the full master and worker configs.
type Bootstrap struct {
	File *graph.File `json:"file"`
}

// ID implements graph.Asset.
func (*Bootstrap) ID() string { return "ignition/bootstrap" }

// Name implements graph.Asset.
func (*Bootstrap) Name() string { return "bootstrap Ignition config" }

// Dependencies implements graph.Asset.
func (*Bootstrap) Dependencies() []graph.Asset {
	deps := []graph.Asset{
		&installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{},
		&kubeconfig.Localhost{}, &kubeconfig.KubeControllerManager{}, &kubeconfig.KubeScheduler{},
		&MasterConfig{}, &WorkerConfig{},
	}
	for _, a := range manifests.Assets() {
		deps = append(deps, a)
	}
	return deps
}

// Generate implements graph.Asset.
func (b *Bootstrap) Generate(_ context.Context, p graph.Parents) error {
	ic, v, bundle := &installconfig.InstallConfig{}, &manifests.Values{}, &tls.Bundle{}
	admin, kcm, sched := &kubeconfig.Localhost{}, &kubeconfig.KubeControllerManager{}, &kubeconfig.KubeScheduler{}
	master, worker := &MasterConfig{}, &WorkerConfig{}
	objects := manifests.Objects()
	bootPods, masterPods, user := &manifests.BootstrapStaticPods{}, &manifests.MasterStaticPods{}, &manifests.UserManifests{}
	parents := []graph.Asset{ic, v, bundle, admin, kcm, sched, master, worker, bootPods, masterPods, user}
	for _, o := range objects {
		parents = append(parents, o)
	}
	if err := p.Get(parents...); err != nil {
		return err
	}
	cfg, err := baseConfig(RoleBootstrap, ic, v)
	if err != nil {
		return err
	}
	if err := place(&cfg, bundle, append(controlPlanePKI(), bootstrapOnlyPKI()...)); err != nil {
		return err
	}
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/admin.kubeconfig", 0o600, admin.File.Data)
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/controller-manager.kubeconfig", 0o600, kcm.File.Data)
	ignition.AddFile(&cfg, nodelayout.KubeconfigDir+"/scheduler.kubeconfig", 0o600, sched.File.Data)
	addFileSet(&cfg, nodelayout.StaticPodDir, bootPods.Files(), 0o644)
	etcd := fileNamed(masterPods.Files(), "etcd.yaml")
	if etcd == nil {
		p := manifests.StaticPodsDir + "/master/etcd.yaml"
		return graph.WithKind(graph.KindInput, &manifests.MissingFileError{Path: p, Dir: path.Dir(p)})
	}
	ignition.AddFile(&cfg, nodelayout.MasterEtcdManifest, 0o644, etcd.Data)
	for _, o := range objects {
		addFileSet(&cfg, nodelayout.BootstrapManifestsDir, o.Files(), 0o600)
	}
	// The user's manifests go beside kiln's: kubectl apply -f <dir> takes
	// them all in file-name order.
	addFileSet(&cfg, nodelayout.BootstrapManifestsDir, user.Files(), 0o600)
	if names := user.Paths(); len(names) > 0 {
		ignition.AddFile(&cfg, nodelayout.BootstrapUserManifestsList, 0o644, []byte(strings.Join(names, "\n")+"\n"))
	}
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/master.ign", 0o600, master.Config)
	ignition.AddFile(&cfg, nodelayout.MCSConfigDir+"/worker.ign", 0o600, worker.Config)
	data, err := ignition.Marshal(cfg)
	if err != nil {
		return err
	}
	b.File = &graph.File{Path: BootstrapFile, Data: data, Mode: 0o600}
	return nil
}

// Files implements graph.WritableAsset.
func (b *Bootstrap) Files() []*graph.File { return []*graph.File{b.File} }

// Load implements graph.WritableAsset: a bootstrap.ign on disk is used as is.
func (b *Bootstrap) Load(f graph.FileFetcher) (bool, error) {
	return loadIgnition(f, BootstrapFile, 0o600, &b.File)
}

// String keeps the keys in the config out of formatted output.
func (b *Bootstrap) String() string { return BootstrapFile }

func fileNamed(files []*graph.File, name string) *graph.File {
	for _, f := range files {
		if baseName(f.Path) == name {
			return f
		}
	}
	return nil
}

// loadIgnition reads an Ignition config from --dir and checks it with
// Ignition's validator, so a hand-edited config is caught here rather than
// on a machine that never joins.
func loadIgnition(f graph.FileFetcher, path string, mode int, dst **graph.File) (bool, error) {
	file, err := f.FetchByName(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := ignition.Validate(file.Data); err != nil {
		return false, graph.WithKind(graph.KindInput, &pathError{path, err})
	}
	file.Mode = fs.FileMode(mode)
	*dst = file
	return true, nil
}

// pathError names the file an input problem is in.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
