package suite

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// Registries of the upstream test images (manifest.go of
// k8s.io/kubernetes/test/utils/image).
const (
	e2eRegistry = "registry.k8s.io/e2e-test-images"
	k8sRegistry = "registry.k8s.io"
)

// conformanceLayersVersion changes whenever the code that writes the
// layers below changes what they hold, so cached archives are rebuilt.
const conformanceLayersVersion = "layers/v1"

// conformanceImages returns the images the [Conformance] specs of
// Kubernetes v1.36.3 run, each under its upstream reference exactly as
// k8s.io/kubernetes/test/utils/image/manifest.go of the pinned release
// names it (so the specs find it without pulling). agnhost:2.55 (the specs' "previous" agnhost, used
// only as a second image name to roll from) is the same build as 2.63.0;
// etcd:3.6.8-0 (the sample API server's storage in the aggregator spec) is
// the node image's etcd build; pause is kiln's own pause program.
func conformanceImages() []nodeimage.ArchiveImage {
	agnhost := func(tag string) nodeimage.ArchiveImage {
		return nodeimage.ArchiveImage{Ref: e2eRegistry + "/agnhost:" + tag, Layers: []string{"debian", "agnhost"},
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}}
	}
	webserver := func(name, tag string) nodeimage.ArchiveImage {
		return nodeimage.ArchiveImage{Ref: e2eRegistry + "/" + name + ":" + tag, Layers: []string{"debian", "agnhost", name},
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}}
	}
	nginx := func(tag string) nodeimage.ArchiveImage {
		return nodeimage.ArchiveImage{Ref: e2eRegistry + "/nginx:" + tag, Layers: []string{"debian", "nginx"},
			Cmd: []string{"nginx", "-g", "daemon off;"}}
	}
	return []nodeimage.ArchiveImage{
		agnhost("2.63.0"),
		agnhost("2.55"),
		{Ref: e2eRegistry + "/busybox:1.37.0-1", Layers: []string{"busybox"}, Cmd: []string{"sh"}},
		nginx("1.15-4"),
		nginx("1.27-0"),
		{Ref: e2eRegistry + "/glibc-dns-testing:2.0.0", Layers: []string{"debian"}, Cmd: []string{"bash"}},
		webserver("nautilus", "1.8"),
		webserver("kitten", "1.8"),
		{Ref: e2eRegistry + "/nonroot:1.5", Layers: []string{"debian"}, User: "1234", Cmd: []string{"/bin/sh"}},
		{Ref: e2eRegistry + "/nonewprivs:1.4", Layers: []string{"debian", "nonewprivs"}, Cmd: []string{"nnp"}},
		{Ref: e2eRegistry + "/sample-apiserver:1.29.2", Layers: []string{"sample-apiserver"}, Entrypoint: []string{"/sample-apiserver"}},
		{Ref: k8sRegistry + "/etcd:3.6.8-0", Layers: []string{"etcd"}, Cmd: []string{"/usr/local/bin/etcd"}},
		{Ref: k8sRegistry + "/pause:3.10.2", Layers: []string{"pause"}, Entrypoint: []string{"/pause"}},
	}
}

// conformanceSources are what the layers are made of.
type conformanceSources struct {
	// rootfs is the Debian toolbox tree.
	rootfs string
	// bins maps program names (agnhost, nonewprivs, sample-apiserver,
	// etcd, pause) to built binaries.
	bins map[string]string
	// module is the k8s.io/kubernetes module directory in the module
	// cache, holding the images' data files (k8s.io/kubernetes/test/images).
	module string
	// busybox is the BusyBox binary built from upstream's release.
	busybox string
}

// treeSkip are paths of the Debian tree that no image needs: device nodes
// and kernel file systems the runtime provides, package caches and docs.
var treeSkip = [...]string{
	"dev", "proc", "sys", "run", "var/cache/apt", "var/lib/apt/lists", "var/log",
	"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
}

// nginxSite replaces Debian's default site: the upstream image serves
// /usr/share/nginx/html on port 80.
const nginxSite = `server {
	listen 80 default_server;
	listen [::]:80 default_server;
	root /usr/share/nginx/html;
	index index.html;
	server_name _;
	location / {
		try_files $uri $uri/ =404;
	}
}
`

// agnhostUsers are the user and group the upstream agnhost image defines
// (adduser -u 1000 user-defined-in-image, addgroup -g 50000).
const (
	agnhostUser  = "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
	agnhostGroup = "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"
)

// conformanceLayer returns the entries of the named layer.
func (b *builder) conformanceLayer(ctx context.Context, name string, src conformanceSources) ([]nodeimage.LayerEntry, error) {
	bin := func(prog, at string, mode int64) nodeimage.LayerEntry {
		return nodeimage.LayerEntry{Name: at, Source: src.bins[prog], Mode: mode}
	}
	html := func(image string) []nodeimage.LayerEntry {
		dir := filepath.Join(src.module, "test", "images", image, "html")
		return []nodeimage.LayerEntry{
			{Name: image + ".jpg", Source: filepath.Join(dir, image+".jpg"), Mode: 0o644},
			{Name: "data.json", Source: filepath.Join(dir, "data.json"), Mode: 0o644},
		}
	}
	switch name {
	case "debian":
		return treeEntries(src.rootfs, treeSkip[:])
	case "agnhost":
		passwd, err := os.ReadFile(filepath.Join(src.rootfs, "etc", "passwd"))
		if err != nil {
			return nil, err
		}
		group, err := os.ReadFile(filepath.Join(src.rootfs, "etc", "group"))
		if err != nil {
			return nil, err
		}
		porter := filepath.Join(src.module, "test", "images", "agnhost", "porter")
		return []nodeimage.LayerEntry{
			bin("agnhost", "agnhost", 0o755),
			{Name: "agnhost-2", Link: "agnhost"},
			{Name: "localhost.crt", Source: filepath.Join(porter, "localhost.crt"), Mode: 0o644},
			{Name: "localhost.key", Source: filepath.Join(porter, "localhost.key"), Mode: 0o644},
			{Name: "uploads", Dir: true, Mode: 0o755},
			{Name: "home/user-defined-in-image", Dir: true, Mode: 0o755},
			{Name: "etc/passwd", Data: append(passwd, agnhostUser...), Mode: 0o644},
			{Name: "etc/group", Data: append(group, agnhostGroup...), Mode: 0o644},
		}, nil
	case "nautilus", "kitten":
		return html(name), nil
	case "nginx":
		return []nodeimage.LayerEntry{
			{Name: "etc/nginx/sites-enabled/default", Data: []byte(nginxSite), Mode: 0o644},
			{Name: "var/log/nginx/access.log", Link: "/dev/stdout"},
			{Name: "var/log/nginx/error.log", Link: "/dev/stderr"},
		}, nil
	case "nonewprivs":
		return []nodeimage.LayerEntry{bin("nonewprivs", "usr/local/bin/nnp", 0o4755)}, nil
	case "busybox":
		return b.busyboxEntries(ctx, src.busybox)
	case "sample-apiserver":
		return withBase(bin("sample-apiserver", "sample-apiserver", 0o755)), nil
	case "etcd":
		return withBase(bin("etcd", "usr/local/bin/etcd", 0o755)), nil
	case "pause":
		return withBase(bin("pause", "pause", 0o755)), nil
	}
	return nil, fmt.Errorf("no layer named %q", name)
}

// withBase returns the base files every single-layer image gets, then
// entries.
func withBase(entries ...nodeimage.LayerEntry) []nodeimage.LayerEntry {
	return append(nodeimage.BaseFiles(), entries...)
}

// busyboxEntries returns the busybox image's only layer: the base files,
// the static BusyBox built from upstream's release (ensureBusybox) as
// /bin/busybox and a link for each applet it lists.
func (b *builder) busyboxEntries(ctx context.Context, busybox string) ([]nodeimage.LayerEntry, error) {
	out, err := b.Output(ctx, nodeimage.Command{Path: busybox, Args: []string{"--list"}})
	if err != nil {
		return nil, err
	}
	entries := withBase(nodeimage.LayerEntry{Name: "bin/busybox", Source: busybox, Mode: 0o755})
	for _, applet := range busyboxApplets(out) {
		entries = append(entries, nodeimage.LayerEntry{Name: "bin/" + applet, Link: "busybox"})
	}
	return entries, nil
}

// busyboxApplets parses `busybox --list`: one applet name a line.
func busyboxApplets(list string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || name == "busybox" || strings.ContainsAny(name, "/ ") {
			continue
		}
		out = append(out, name)
	}
	return out
}

// treeEntries returns every directory, regular file and symlink under root
// as layer entries, except the paths in skip (relative, slash-separated),
// whose directories are kept empty. Device nodes, sockets and pipes are left
// out: the runtime provides /dev.
func treeEntries(root string, skip []string) ([]nodeimage.LayerEntry, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	var entries []nodeimage.LayerEntry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := tarMode(fi.Mode())
		switch {
		case d.IsDir():
			entries = append(entries, nodeimage.LayerEntry{Name: rel, Dir: true, Mode: mode})
			if skipped[rel] {
				return fs.SkipDir
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries = append(entries, nodeimage.LayerEntry{Name: rel, Link: target})
		case fi.Mode().IsRegular():
			entries = append(entries, nodeimage.LayerEntry{Name: rel, Source: p, Mode: mode})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", root, err)
	}
	return entries, nil
}

// tarMode returns the permission bits of m with setuid, setgid and sticky
// as tar stores them.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
