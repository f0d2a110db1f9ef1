package nodeimage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
)

// ImagesDir is where the node image keeps its container images.
const ImagesDir = "/opt/kiln/images"

// proxyTools are the programs kube-proxy runs: iptables mode needs the
// iptables family and conntrack, nftables mode needs nft. They are copied
// from the node's own Debian tree with their shared libraries.
var proxyTools = [...]string{
	"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore",
	"conntrack", "nft",
}

// firewallTools are the programs kube-router's network policy controller
// runs: the iptables family (it writes its chains with iptables-restore)
// and ipset (pod and namespace selectors become ipsets).
var firewallTools = [...]string{
	"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore",
	"ipset",
}

// imageTools returns the programs of the node's Debian tree that the image
// of c holds besides kiln's binaries: none for most.
func imageTools(c release.Component) []string {
	switch c {
	case release.KubeProxy:
		return proxyTools[:]
	case release.KubeRouter:
		return firewallTools[:]
	}
	return nil
}

// netbaseFiles are the Debian tree's protocol and service name tables,
// copied into every image with tools. The tools name protocols through
// them: without /etc/protocols, nft --json lists an inet_proto key as 6,
// not tcp, and kube-proxy's nftables mode, which reads its maps back when
// it starts, took each listed element for a stale one and deleted it, so a
// restarted kube-proxy left its node without any Service rule until its
// hourly full resync.
var netbaseFiles = [...]string{"/etc/protocols", "/etc/services"}

// toolDirs are searched, in order, for the tools of imageTools.
var toolDirs = [...]string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// baseFiles are small files every image gets: a user database (os/user
// and klog look up the current user) and a name service order.
var baseFiles = [...]LayerEntry{
	{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
	{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	{Name: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
	{Name: "tmp", Dir: true, Mode: 0o1777},
}

// BaseFiles returns the small files every image gets (baseFiles), a copy
// to append an image's own entries to.
func BaseFiles() []LayerEntry {
	return append([]LayerEntry(nil), baseFiles[:]...)
}

// imageEntries returns the layer of spec: its binaries from bins (name ->
// host path), the base files, and the tools of imageTools.
func (b *builder) imageEntries(ctx context.Context, spec release.ImageSpec, bins map[string]string, rootfs string) ([]LayerEntry, error) {
	entries := BaseFiles()
	for _, name := range spec.Binaries {
		src, ok := bins[name]
		if !ok {
			return nil, fmt.Errorf("image %s: no binary %s was built", spec.Ref(), name)
		}
		entries = append(entries, LayerEntry{Name: strings.TrimPrefix(release.BinDir, "/") + "/" + name, Source: src, Mode: 0o755})
	}
	if names := imageTools(spec.Component); len(names) > 0 {
		tools, err := b.toolEntries(ctx, rootfs, names)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.Ref(), err)
		}
		entries = append(entries, tools...)
	}
	return entries, nil
}

// toolEntries returns layer entries for programs of the Debian tree at
// rootfs: each program, the iptables extensions it loads at run time, the
// shared libraries they link (found with ldd inside the tree), the symlinks
// that lead to them, and netbaseFiles. usr-merged top-level links (/lib -> usr/lib)
// are copied as they are.
func (b *builder) toolEntries(ctx context.Context, rootfs string, tools []string) ([]LayerEntry, error) {
	t := &tree{root: rootfs, seen: map[string]bool{}}
	for _, top := range []string{"bin", "sbin", "lib", "lib64"} {
		if link, err := os.Readlink(filepath.Join(rootfs, top)); err == nil {
			t.entries = append(t.entries, LayerEntry{Name: top, Link: link})
		}
	}
	var files []string
	for _, tool := range tools {
		p, err := t.find(tool)
		if err != nil {
			return nil, err
		}
		real, err := t.add(p)
		if err != nil {
			return nil, err
		}
		files = append(files, real)
	}
	for _, f := range netbaseFiles {
		if _, err := t.add(f); err != nil {
			return nil, err
		}
	}
	// iptables loads its match and target extensions with dlopen, so ldd
	// cannot see them: take the whole extension directory.
	for _, f := range files {
		if !strings.HasSuffix(f, "/xtables-nft-multi") && !strings.HasSuffix(f, "/xtables-legacy-multi") {
			continue
		}
		out, err := b.run.output(ctx, lddCmd(rootfs, []string{f}), true)
		if err != nil {
			return nil, err
		}
		libs, err := parseLdd(out)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			if strings.HasPrefix(path.Base(lib), "libxtables.so") {
				ext, err := t.addDir(path.Join(path.Dir(lib), "xtables"))
				if err != nil {
					return nil, err
				}
				files = append(files, ext...)
			}
		}
	}
	out, err := b.run.output(ctx, lddCmd(rootfs, files), true)
	if err != nil {
		return nil, err
	}
	libs, err := parseLdd(out)
	if err != nil {
		return nil, err
	}
	for _, lib := range libs {
		if _, err := t.add(lib); err != nil {
			return nil, err
		}
	}
	return t.entries, nil
}

// lddCmd lists the shared libraries of files (paths inside rootfs) with
// the tree's own ldd and loader.
func lddCmd(rootfs string, files []string) Command {
	return Command{Path: "chroot", Args: append([]string{rootfs, "ldd"}, files...)}
}

// parseLdd returns the absolute library paths in ldd output, each once. A
// library ldd cannot find is an error: the program would not start.
func parseLdd(out string) ([]string, error) {
	var libs []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasSuffix(line, "=> not found") {
			return nil, fmt.Errorf("ldd: %s", line)
		}
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		p, _, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, ":") || seen[p] {
			continue
		}
		seen[p] = true
		libs = append(libs, p)
	}
	return libs, nil
}

// writeImages writes every image of the release as <component>.tar into
// dir, plus images.txt ("<file> <ref>" lines, read by import-images) and
// index.json (component -> {file, ref}).
func (b *builder) writeImages(ctx context.Context, dir, rootfs string, bins map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type indexEntry struct {
		File string `json:"file"`
		Ref  string `json:"ref"`
	}
	index := map[string]indexEntry{}
	var list strings.Builder
	for _, spec := range b.pinned().Images() {
		entries, err := b.imageEntries(ctx, spec, bins, rootfs)
		if err != nil {
			return err
		}
		file := string(spec.Component) + ".tar"
		a := newDockerArchive(dir)
		err = a.addLayer(file, "kiln build node-image", entries)
		if err == nil {
			err = a.writeFile(filepath.Join(dir, file), []ArchiveImage{{
				Ref: spec.Ref(), Layers: []string{file}, Entrypoint: []string{spec.Entrypoint()},
			}})
		}
		a.close()
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref(), err)
		}
		index[string(spec.Component)] = indexEntry{File: file, Ref: spec.Ref()}
		fmt.Fprintf(&list, "%s %s\n", file, spec.Ref())
	}
	data, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "images.txt"), []byte(list.String()), 0o644)
}
