package nodeimage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
)

// enableUnits are enabled in the image. kubelet is not: each machine's
// Ignition config enables it.
var enableUnits = [...]string{
	"systemd-networkd.service", // the machine runtime writes /etc/systemd/network/*.network
	"containerd.service",
	"kiln-cgroup-rw.service",
	"kiln-images.service",
	"kiln-ignition.service",
}

// maskUnits make no sense in a container machine without a console or a
// network path to the outside.
var maskUnits = [...]string{
	"getty.target", "console-getty.service", "container-getty@.service",
	"getty@.service", "serial-getty@.service",
	"systemd-firstboot.service",
	"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
	"e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer",
}

// plan is what Ensure will build, with the key that names it.
type plan struct {
	key string
	// inputs is the key without the Go toolchain (Image.Inputs).
	inputs string
	dir    string
	files  []bakedFile
}

// plan computes what Ensure builds and the key that names it.
func (b *builder) plan() (*plan, error) {
	files, err := bakedFiles()
	if err != nil {
		return nil, err
	}
	// An empty toolchain version leaves the Go toolchain out of every
	// component's key, so inputs names what the image is built from.
	inputs, err := imageKey(b.pinned(), "", files)
	if err != nil {
		return nil, err
	}
	p := &plan{inputs: inputs, files: files}
	if b.goErr == nil {
		if p.key, err = imageKey(b.pinned(), b.goVersion, files); err != nil {
			return nil, err
		}
		p.dir = filepath.Join(b.cache, "images", "node-"+p.key)
	}
	return p, nil
}

// imageKey hashes every input of the image: the base tree's key, each
// component's key, the baked files with their modes, the unit lists, the
// tools and netbase files of the images, the pre-import scripts and the
// release rel.
func imageKey(rel release.Release, goVersion string, files []bakedFile) (string, error) {
	h := NewHasher("node-image/v1")
	h.Add("base", debootstrapKey())
	for _, c := range Components(rel) {
		src, err := c.Sources()
		if err != nil {
			return "", err
		}
		h.Add("component:"+c.Name, c.Key(goVersion, src))
	}
	for _, f := range files {
		h.Add(fmt.Sprintf("baked:%s:%o", f.Path, f.Mode), string(f.Data))
	}
	h.Add("enable", strings.Join(enableUnits[:], " "))
	h.Add("mask", strings.Join(maskUnits[:], " "))
	h.Add("proxy-tools", strings.Join(proxyTools[:], " "))
	h.Add("firewall-tools", strings.Join(firewallTools[:], " "))
	h.Add("netbase", strings.Join(netbaseFiles[:], " "))
	h.Add("preimport", preimportOuter+preimportInner)
	info, err := json.Marshal(rel.Info())
	if err != nil {
		return "", err
	}
	h.Add("release", string(info))
	return h.Sum(), nil
}

// build builds what is missing (components and base tree, see
// buildParts), then the image.
func (b *builder) build(ctx context.Context, p *plan) (*Image, error) {
	parts, err := b.buildParts(ctx)
	if err != nil {
		return nil, err
	}
	end := b.progress.Start("Assembling the node image")
	img, err := b.assemble(ctx, p, parts.Base, parts.Bins)
	end(err)
	return img, err
}

// assemble copies the base tree and adds binaries, images, baked files
// and unit settings, then publishes the result under p.dir.
func (b *builder) assemble(ctx context.Context, p *plan, base string, bins map[string]string) (*Image, error) {
	tmp, err := Scratch(p.dir)
	if err != nil {
		return nil, err
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := b.run.run(ctx, copyTreeCmd(base, rootfs)); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := linkOrCopy(bins[n], filepath.Join(rootfs, release.BinDir, n), 0o755); err != nil {
			return nil, err
		}
	}
	b.progress.Update("writing container images")
	if err := b.writeImages(ctx, filepath.Join(rootfs, ImagesDir), rootfs, bins); err != nil {
		return nil, err
	}
	if err := installBaked(rootfs, p.files); err != nil {
		return nil, err
	}
	rel, err := json.MarshalIndent(b.pinned().Info(), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := installBaked(rootfs, []bakedFile{{Path: "/etc/kiln/release.json", Data: append(rel, '\n'), Mode: 0o644}}); err != nil {
		return nil, err
	}
	for _, c := range []Command{systemctlCmd(rootfs, "enable", enableUnits[:]), systemctlCmd(rootfs, "mask", maskUnits[:])} {
		if err := b.run.run(ctx, c); err != nil {
			return nil, err
		}
	}
	b.progress.Update("importing the container images into the image's containerd")
	if err := preimport(ctx, rootfs, b.run.run, b.log); err != nil {
		return nil, err
	}
	if err := resetIdentity(rootfs); err != nil {
		return nil, err
	}
	mirror, _ := os.ReadFile(filepath.Join(filepath.Dir(base), mirrorFile))
	img := &Image{Hash: p.key, Inputs: p.inputs, Release: b.pinned().Info(), Packages: Packages(), Mirror: strings.TrimSpace(string(mirror))}
	meta, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, metadataFile), append(meta, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := Publish(tmp, p.dir); err != nil {
		return nil, err
	}
	return load(p.dir)
}

// copyTreeCmd copies the base tree with owners, modes, links and device
// nodes intact (sharing blocks where the file system can).
func copyTreeCmd(src, dst string) Command {
	return Command{Path: "cp", Args: []string{"-a", "--reflink=auto", src, dst}}
}

// systemctlCmd runs the tree's own systemctl on the tree, offline.
func systemctlCmd(rootfs, verb string, units []string) Command {
	return Command{Path: "chroot", Args: append([]string{rootfs, "systemctl", verb}, units...)}
}

// resetIdentity removes what would make every machine the same host: the
// machine ID (an empty file makes systemd generate one per machine), the
// build host's name and its DNS settings.
func resetIdentity(rootfs string) error {
	if err := os.WriteFile(filepath.Join(rootfs, "etc/machine-id"), nil, 0o444); err != nil {
		return err
	}
	for _, f := range []string{"etc/hostname", "var/lib/dbus/machine-id"} {
		if err := os.Remove(filepath.Join(rootfs, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	resolv := filepath.Join(rootfs, "etc/resolv.conf")
	if err := os.Remove(resolv); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(resolv, nil, 0o644)
}

// linkOrCopy hard-links src to dst (the cache and the image share a file
// system), or copies it.
func linkOrCopy(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(src, mode); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
