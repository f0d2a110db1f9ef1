package nodeimage

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// The node payload is the part of the node image a host that is not kiln's
// node image lacks (the ssh platform's hosts run Debian 12 of their own),
// as a systemd system extension: a directory that systemd-sysext merges
// into /usr as a read-only overlay, so nothing of the host's own
// tree is written and unmerging removes all of it (docs/platform-ssh.md).
// It holds
//   - kiln itself, the node agent its units run (nodelayout.KilnBinary);
//   - what kiln builds from source and a host runs itself
//     (sysextBinaries, in /usr/local/bin), and kiln's helpers in
//     /usr/local/libexec/kiln; the control plane, etcd and the add-ons run
//     from their container images;
//   - the container images, in SysextImagesDir, with the import script
//     rendered for that directory: the payload stays out of /opt, which
//     systemd-sysext would make read-only for the host and for the
//     bootstrap host's manifests (nodelayout.BootstrapManifestsDir);
//   - the Debian packages kiln's nodes need and a Debian server does not
//     have (sysextPackages), their files under /usr but for documentation;
//   - the image's own units (containerd, kiln-ignition, kiln-images,
//     kiln-cgroup-rw), moved from /etc/systemd/system to
//     /usr/lib/systemd/system, and containerd's config, which the unit
//     reads from /usr/share/kiln (sysextContainerdDropIn);
//   - the extension-release file that names the OS it extends.
//
// The rest of the image's /etc (journald's settings) belongs to the host
// and is left out.

// sysextPackages are the Debian packages whose files the payload carries:
// Debian's Ignition (applies the node's config on the live host) and the
// CNI plugins (the pod network's bridge, host-local, portmap, loopback).
// Tools a host is expected to have from its own packages (iptables,
// conntrack) are not shipped: an extension's copy would hide the host's
// own, maybe newer, one.
var sysextPackages = [...]string{"ignition", "containernetworking-plugins"}

// sysextBinaries are the image's binaries in /usr/local/bin that run on
// the host itself: kubelet, the container runtime, kubectl, with which
// the bootstrap host applies the cluster's manifests, and etcdutl, with
// which a master restores a snapshot (kiln restore cluster) while its
// etcd, whose image holds the others, is stopped.
var sysextBinaries = [...]string{"containerd", "containerd-shim-runc-v2", "ctr", "etcdutl", "kubectl", "kubelet", "runc"}

// sysextUnits are the image's units the payload carries.
var sysextUnits = [...]string{"containerd.service", "kiln-cgroup-rw.service", "kiln-ignition.service", "kiln-images.service"}

// SysextImagesDir is where the payload keeps the container images.
const SysextImagesDir = "/" + nodelayout.PayloadImagesDir

// SysextContainerdConfig is where the payload's containerd reads its
// config, instead of /etc/containerd/config.toml, which stays the host's.
const SysextContainerdConfig = "/usr/share/kiln/containerd/config.toml"

// sysextContainerdDropIn points the payload's containerd unit at its
// config.
const sysextContainerdDropIn = "[Service]\nExecStart=\nExecStart=/usr/local/bin/containerd --config " + SysextContainerdConfig + "\n"

// SysextName is the name of the payload's extension for the release
// version: its directory under /var/lib/extensions and the suffix of its
// extension-release file.
func SysextName(version string) string { return nodelayout.PayloadExtension(version) }

// sysextEntry is one file of the payload: from a file of the image's root
// (From, a path inside it) or with Data, at To (a path inside the
// extension).
type sysextEntry struct {
	From, To string
	Data     []byte
	Mode     fs.FileMode
}

// sysextEntries lists the payload of the image root rootfs for the
// extension name, sorted by To.
func sysextEntries(rootfs, name string) ([]sysextEntry, error) {
	var out []sysextEntry
	add := func(from, to string) { out = append(out, sysextEntry{From: from, To: to}) }
	for _, b := range sysextBinaries {
		add("/usr/local/bin/"+b, "/usr/local/bin/"+b)
	}
	for dir, to := range map[string]string{"/usr/local/libexec/kiln": "/usr/local/libexec/kiln", ImagesDir: SysextImagesDir} {
		err := filepath.WalkDir(filepath.Join(rootfs, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(filepath.Join(rootfs, dir), p)
			if err != nil {
				return err
			}
			from, into := path.Join(dir, filepath.ToSlash(rel)), path.Join(to, filepath.ToSlash(rel))
			if from != importScript {
				add(from, into)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("node payload: %w", err)
		}
	}
	script, err := payloadImportScript()
	if err != nil {
		return nil, err
	}
	out = append(out, sysextEntry{To: importScript, Data: script, Mode: 0o755})
	for _, pkg := range sysextPackages {
		files, err := packageFiles(rootfs, pkg)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			add(f, f)
		}
	}
	for _, u := range sysextUnits {
		add("/etc/systemd/system/"+u, "/usr/lib/systemd/system/"+u)
	}
	add("/etc/containerd/config.toml", SysextContainerdConfig)
	out = append(out,
		sysextEntry{To: "/usr/lib/systemd/system/containerd.service.d/10-kiln-payload.conf", Data: []byte(sysextContainerdDropIn), Mode: 0o644},
		sysextEntry{To: "/usr/lib/extension-release.d/extension-release." + name, Data: []byte(extensionRelease()), Mode: 0o644})
	sort.Slice(out, func(i, j int) bool { return out[i].To < out[j].To })
	return out, nil
}

// payloadImportScript is the image's import script rendered for
// SysextImagesDir.
func payloadImportScript() ([]byte, error) {
	data := imageBakedData()
	data.ImagesDir = SysextImagesDir
	files, err := renderBaked(data)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Path == importScript {
			return f.Data, nil
		}
	}
	return nil, fmt.Errorf("node payload: data/nodeimage has no %s", importScript)
}

// extensionRelease names the OS the payload extends: the image's Debian
// release, whose binaries it carries.
func extensionRelease() string {
	return "ID=debian\nVERSION_ID=12\n"
}

// packageFiles lists the regular files and links the Debian package pkg
// installed in rootfs (dpkg's list), under /usr but for its documentation,
// with the paths merged-/usr gives them.
func packageFiles(rootfs, pkg string) ([]string, error) {
	var data []byte
	var err error
	for _, name := range []string{pkg + ".list", pkg + ":amd64.list"} {
		if data, err = os.ReadFile(filepath.Join(rootfs, "var/lib/dpkg/info", name)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("node payload: Debian package %s is not in the image: %w", pkg, err)
	}
	var files []string
	for _, p := range strings.Split(string(data), "\n") {
		for _, top := range []string{"/bin/", "/sbin/", "/lib/", "/lib64/"} {
			if strings.HasPrefix(p, top) {
				p = "/usr" + p
			}
		}
		if !strings.HasPrefix(p, "/usr/") || strings.HasPrefix(p, "/usr/share/doc/") || strings.HasPrefix(p, "/usr/share/man/") ||
			strings.HasPrefix(p, "/usr/share/lintian/") {
			continue
		}
		st, err := os.Lstat(filepath.Join(rootfs, p))
		if err != nil {
			return nil, fmt.Errorf("node payload: %s of package %s: %w", p, pkg, err)
		}
		if !st.IsDir() {
			files = append(files, p)
		}
	}
	return files, nil
}

// WriteSysext writes the image's node payload (see sysextEntries) with
// the kiln binary at kiln (a static build: it runs on the hosts) as the
// system extension directory dest, named SysextName of the image's
// release: hard links to the image's files where the file system allows,
// else copies; links stay links. A file of the payload may be the image's
// own: replace it, never write into it. dest must not exist; the payload is
// written beside it and renamed into place, so dest is whole or absent.
func (img *Image) WriteSysext(dest, kiln string) error {
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("node payload: %s exists", dest)
	}
	entries, err := sysextEntries(img.RootFS, SysextName(img.Release.Kubernetes))
	if err != nil {
		return err
	}
	st, err := os.Stat(kiln)
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("node payload: the kiln binary %s: not a file (%v)", kiln, err)
	}
	tmp := dest + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	// Its own mode: linkOrCopy sets the source's, and the binary is not
	// the cache's to change.
	if err := linkOrCopy(kiln, filepath.Join(tmp, filepath.FromSlash(nodelayout.KilnBinary)), st.Mode().Perm()); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("node payload: %w", err)
	}
	for _, e := range entries {
		if err := writeSysextEntry(img.RootFS, tmp, e); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("node payload: %s: %w", e.To, err)
		}
	}
	// kube-proxy mounts /lib/modules (/usr/lib/modules on a merged-/usr
	// Debian) from its host. A host whose kernel has no modules on disk (a
	// container, a kernel built without modules) has no such directory,
	// and with /usr read-only once merged, kubelet cannot create it: the
	// payload brings an empty one, which the merge lays under the host's.
	if err := os.MkdirAll(filepath.Join(tmp, sysextModulesDir), 0o755); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("node payload: %w", err)
	}
	return os.Rename(tmp, dest)
}

// sysextModulesDir is the kernel modules' directory inside the payload.
const sysextModulesDir = "usr/lib/modules"

func writeSysextEntry(rootfs, dir string, e sysextEntry) error {
	dst := filepath.Join(dir, filepath.FromSlash(e.To))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if e.From == "" {
		return os.WriteFile(dst, e.Data, e.Mode)
	}
	src := filepath.Join(rootfs, filepath.FromSlash(e.From))
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if path.IsAbs(target) && !strings.HasPrefix(target, "/usr/") {
			return fmt.Errorf("links to %s, outside the extension's /usr", target)
		}
		return os.Symlink(target, dst)
	}
	return linkOrCopy(src, dst, st.Mode().Perm())
}
