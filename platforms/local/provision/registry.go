package provision

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	tfdata "github.com/kiln-project/kiln/data/terraform"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/registry"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// setRegistry sets the network stage's variables of c's image registry
// (kilnlocal_registry, beside the API load balancer): its port and the
// registry binary, built into kiln's cache on first use (EnsureRegistry);
// none when c has no registry. The binary is looked up on every create
// and start, so one removed from the cache is built again.
func (p *Provisioner) setRegistry(ctx context.Context, c *platforms.Cluster, v *tfdata.LocalVars) error {
	r, ok := configs.ImageRegistry(c.Config)
	if !ok {
		v.Registry = nil
		return nil
	}
	ensure := p.EnsureRegistry
	if ensure == nil {
		ensure = nodeimage.EnsureRegistry
	}
	bin, err := ensure(ctx, nodeimage.Options{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress, Proxy: c.Config.Proxy})
	if err != nil {
		return err
	}
	v.Registry = &tfdata.Registry{Port: int(r.Endpoint.Port()), Binary: bin}
	return nil
}

// pushKilnImages pushes kiln's own images (kiln.local/...), the archives
// of the node image at rootfs, into the cluster's registry, so a pod that
// names one with imagePullPolicy Always finds it. A node image given as a
// tarball has no archives on the host: then nothing is pushed.
func (p *Provisioner) pushKilnImages(ctx context.Context, c *platforms.Cluster, rootfs string) error {
	r, ok := configs.ImageRegistry(c.Config)
	if !ok {
		return nil
	}
	dir := filepath.Join(rootfs, nodeimage.ImagesDir)
	archives, err := imageArchives(dir)
	if errors.Is(err, fs.ErrNotExist) {
		p.Env.Log.Infof("Not pushing kiln's images into the registry: the node image %s has no %s on the host", rootfs, nodeimage.ImagesDir)
		return nil
	}
	if err != nil {
		return err
	}
	pusher := newPusher(r)
	end := p.Env.Progress.Start(fmt.Sprintf("Pushing kiln's %d images into the image registry %s", len(archives), r.Name))
	for _, a := range archives {
		if _, err = pusher.Push(ctx, filepath.Join(dir, a)); err != nil {
			break
		}
	}
	end(err)
	return err
}

// pushArchive pushes the images of the archive at path that the cluster's
// registry mirrors or that name it into it, when the cluster has a
// registry that runs; otherwise it says why not and does nothing.
func (p *Provisioner) pushArchive(ctx context.Context, infraID, path string) error {
	dir := p.lbDir(infraID)
	addr, err := registry.ReadAddr(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no registry add-on
	}
	if err != nil {
		return err
	}
	r := types.RegistryAt(addr)
	if _, err := registry.Process("", dir).PID(); err != nil {
		p.Env.Log.Warnf("The image registry %s does not run (`kiln start cluster` starts it): %s is not pushed into it", r.Name, filepath.Base(path))
		return nil
	}
	end := p.Env.Progress.Start(fmt.Sprintf("Pushing the images of %s into the image registry %s", filepath.Base(path), r.Name))
	res, err := newPusher(r).Push(ctx, path)
	if errors.Is(err, registry.ErrNotDockerArchive) {
		end(nil)
		p.Env.Log.Warnf("%s is not pushed into the image registry: %v", filepath.Base(path), err)
		return nil
	}
	end(err)
	if err != nil {
		return err
	}
	p.Env.Log.Infof("Pushed %d images into %s", len(res.Pushed), r.Name)
	if len(res.Skipped) > 0 {
		p.Env.Log.Infof("Not pushed, as the nodes do not look them up in %s (only %s and its own names): %s",
			r.Name, strings.Join(r.Mirrors, ", "), strings.Join(res.Skipped, ", "))
	}
	return nil
}

// newPusher returns the pusher into r, through its push address on the
// host's loopback.
func newPusher(r types.ImageRegistry) *registry.Pusher {
	return &registry.Pusher{Addr: registry.PushAddr(r.Endpoint), Names: registry.Names{Self: r.Name, Mirrors: r.Mirrors}}
}

// imageArchives returns the archive files that images.txt in dir lists
// ("file reference" lines), in order.
func imageArchives(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, "images.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 0 {
			out = append(out, fields[0])
		}
	}
	return out, sc.Err()
}
