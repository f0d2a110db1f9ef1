package provision

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

var (
	_ platforms.Upgrader  = (*Provisioner)(nil)
	_ platforms.NodeShell = (*Provisioner)(nil)
)

// kubeletUnit is the node's kubelet service.
const kubeletUnit = "kubelet.service"

// nodeImage returns the node image of release version: built (or reused)
// when build is true, else only from the cache.
func (p *Provisioner) nodeImage(ctx context.Context, version string, build bool) (*nodeimage.Image, error) {
	r, err := release.Lookup(version)
	if err != nil {
		return nil, err
	}
	opts := nodeimage.Options{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress, Release: r}
	if build {
		return nodeimage.Ensure(ctx, opts)
	}
	img, err := nodeimage.Cached(opts)
	if err != nil {
		return nil, err
	}
	if img == nil {
		return nil, fmt.Errorf("the node image of Kubernetes %s is not in the cache: kiln build node-image --kubernetes-version %s", version, version)
	}
	return img, nil
}

// nodeOf is an error unless node is a node (master or worker) of infraID:
// what an upgrade changes is never another cluster's machine, nor the
// bootstrap machine.
func nodeOf(infraID, node string) error {
	if !isNode(infraID, node) {
		return fmt.Errorf("%s is not a node of cluster %s", node, infraID)
	}
	return nil
}

// PrepareRelease builds or reuses the node image of release version: the
// payload every node's upgrade takes its images and kubelet from.
func (p *Provisioner) PrepareRelease(ctx context.Context, version string) error {
	_, err := p.nodeImage(ctx, version, true)
	return err
}

// LoadRelease imports the images of components of release version, from
// its node image's archives, into node's containerd.
func (p *Provisioner) LoadRelease(ctx context.Context, infraID, node, version string, components []release.Component) error {
	if err := nodeOf(infraID, node); err != nil {
		return err
	}
	img, err := p.nodeImage(ctx, version, false)
	if err != nil {
		return err
	}
	mgr := p.machines()
	for _, c := range components {
		archive := filepath.Join(img.RootFS, filepath.FromSlash(nodeimage.ImagesDir), string(c)+".tar")
		if err := mgr.ImportImageArchive(ctx, node, archive); err != nil {
			return err
		}
	}
	return nil
}

// InstallKubelet copies the kubelet of release version's node image over
// node's (into its copy-on-write layer, so it stays across restarts of the
// machine) and restarts the kubelet.
func (p *Provisioner) InstallKubelet(ctx context.Context, infraID, node, version string) error {
	if err := nodeOf(infraID, node); err != nil {
		return err
	}
	img, err := p.nodeImage(ctx, version, false)
	if err != nil {
		return err
	}
	bin := path.Join(release.BinDir, "kubelet")
	src, err := os.Open(filepath.Join(img.RootFS, filepath.FromSlash(bin)))
	if err != nil {
		return fmt.Errorf("the kubelet of %s: %w", version, err)
	}
	defer src.Close()
	mgr := p.machines()
	if err := mgr.WriteFile(ctx, node, bin, 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	}); err != nil {
		return err
	}
	if _, err := mgr.Exec(ctx, node, restartKubeletArgv()...); err != nil {
		return fmt.Errorf("restarting the kubelet of %s: %w", node, err)
	}
	return nil
}

// restartKubeletArgv restarts the node's kubelet, inside the machine.
func restartKubeletArgv() []string { return []string{"systemctl", "restart", kubeletUnit} }

// ReadNodeFile reads path on node.
func (p *Provisioner) ReadNodeFile(ctx context.Context, infraID, node, path string) ([]byte, error) {
	if err := nodeOf(infraID, node); err != nil {
		return nil, err
	}
	return p.machines().ReadFile(ctx, node, path)
}

// WriteNodeFile replaces path on node with data.
func (p *Provisioner) WriteNodeFile(ctx context.Context, infraID, node, path string, data []byte, mode fs.FileMode) error {
	if err := nodeOf(infraID, node); err != nil {
		return err
	}
	return p.machines().WriteFile(ctx, node, path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// PutNodeFile replaces path on node with src's bytes (platforms.NodeShell).
func (p *Provisioner) PutNodeFile(ctx context.Context, c *platforms.Cluster, node, path string, src io.Reader, mode fs.FileMode) error {
	if err := nodeOf(c.InfraID, node); err != nil {
		return err
	}
	return p.machines().WriteFile(ctx, node, path, mode, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	})
}

// RunOnNode runs argv inside node's machine (platforms.NodeShell).
func (p *Provisioner) RunOnNode(ctx context.Context, c *platforms.Cluster, node string, argv ...string) ([]byte, error) {
	if err := nodeOf(c.InfraID, node); err != nil {
		return nil, err
	}
	return p.machines().Exec(ctx, node, argv...)
}
