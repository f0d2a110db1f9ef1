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
	"time"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/lb"
	"github.com/kiln-project/kiln/platforms/local/nodeimage"
	"github.com/kiln-project/kiln/platforms/local/registry"
)

// registryStopTimeout bounds the registry's graceful stop.
const registryStopTimeout = 10 * time.Second

// startRegistry starts the cluster's registry (the registry add-on)
// unless it runs already or the add-on is off: its binary from the kiln
// cache (built on first use), its configuration and storage in the
// cluster's load balancer directory. It listens on the bridge address, so
// the bridge must exist.
func (p *Provisioner) startRegistry(ctx context.Context, c *platforms.Cluster) error {
	r, ok := c.Config.ImageRegistry()
	if !ok {
		return nil
	}
	dir := p.lbDir(c.InfraID)
	if _, err := registry.Process("", dir).PID(); err == nil {
		return nil
	}
	bin, err := nodeimage.EnsureRegistry(ctx, nodeimage.Options{CacheDir: p.Env.CacheDir, Log: p.Env.Log, Progress: p.Env.Progress})
	if err != nil {
		return err
	}
	if err := registry.WriteConfig(dir, r.Endpoint); err != nil {
		return err
	}
	proc := registry.Process(bin, dir)
	end := p.Env.Progress.Start(fmt.Sprintf("Starting the image registry %s (the nodes reach it on %s)", r.Name, r.Endpoint))
	_, err = proc.Start(ctx)
	if err != nil && ctx.Err() == nil {
		// It exited: the reason, such as a port in use, is its log's last line.
		err = fmt.Errorf("the image registry did not start: %s (see %s); free port %d, or create the cluster with another "+
			"platform.local.registryPort or with platform.local.addons.registry: false", lastLogLine(proc.LogFile), proc.LogFile, r.Endpoint.Port())
	}
	end(err)
	return err
}

// stopRegistry stops the cluster's registry; one that does not run is
// fine. Its storage stays.
func (p *Provisioner) stopRegistry(ctx context.Context, infraID string) error {
	err := registry.Process("", p.lbDir(infraID)).Stop(ctx, registryStopTimeout)
	if errors.Is(err, lb.ErrNotRunning) {
		return nil
	}
	return err
}

// pushKilnImages pushes kiln's own images (kiln.local/...), the archives
// of the node image at rootfs, into the cluster's registry, so a pod that
// names one with imagePullPolicy Always finds it. A node image given as a
// tarball has no archives on the host: then nothing is pushed.
func (p *Provisioner) pushKilnImages(ctx context.Context, c *platforms.Cluster, rootfs string) error {
	r, ok := c.Config.ImageRegistry()
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

// logTail is how much of a log lastLogLine reads.
const logTail = 4096

// lastLogLine returns the last line of the log file at path, "" when it
// cannot be read.
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	buf := make([]byte, min(st.Size(), logTail))
	n, _ := f.ReadAt(buf, st.Size()-int64(len(buf)))
	return lastLine(string(buf[:n]))
}
