package provision

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

var (
	_ platforms.Upgrader  = (*Provisioner)(nil)
	_ platforms.NodeShell = (*Provisioner)(nil)
)

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
func (p *Provisioner) PrepareRelease(ctx context.Context, _ *platforms.Cluster, version string) error {
	_, err := p.nodeImage(ctx, version, true)
	return err
}

// StageRelease puts release version's kubelet and container images, from
// its node image, at nodelayout.ReleasesDir/<version> in node's machine:
// hard links into a host directory bound there, which the machine sees
// complete or not at all.
func (p *Provisioner) StageRelease(ctx context.Context, c *platforms.Cluster, node, version string) error {
	if err := nodeOf(c.InfraID, node); err != nil {
		return err
	}
	img, err := p.nodeImage(ctx, version, false)
	if err != nil {
		return err
	}
	files, err := payloadFiles(img.RootFS)
	if err != nil {
		return fmt.Errorf("the payload of %s: %w", version, err)
	}
	return p.machines().StageTree(ctx, node, version, files)
}

// payloadFiles maps the paths of a release's node payload
// (nodelayout.PayloadKubelet, nodelayout.PayloadImagesDir) to their files
// in the node image at rootfs.
func payloadFiles(rootfs string) (map[string]string, error) {
	files := map[string]string{
		nodelayout.PayloadKubelet: filepath.Join(rootfs, filepath.FromSlash(path.Join(release.BinDir, "kubelet"))),
	}
	dir := filepath.Join(rootfs, filepath.FromSlash(nodeimage.ImagesDir))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".tar") {
			files[path.Join(nodelayout.PayloadImagesDir, e.Name())] = filepath.Join(dir, e.Name())
		}
	}
	return files, nil
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
