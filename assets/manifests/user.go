package manifests

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	manifestfs "github.com/kiln-project/kiln/data/manifests"
	"github.com/kiln-project/kiln/graph"
)

var _ graph.WritableAsset = (*UserManifests)(nil)

// UserManifests are the files the user added to manifests/ after `kiln
// create manifests` (a CNI, namespaces, operators...). bootkube applies them
// together with kiln's own objects, all in file-name order: name a file
// 50-something.yaml to apply it after kiln's (00- to 19-).
type UserManifests struct{ fileSet }

// ID implements graph.Asset.
func (*UserManifests) ID() string { return "manifests/user" }

// Name implements graph.Asset.
func (*UserManifests) Name() string { return "manifests you added" }

// Dependencies implements graph.Asset: the files are the user's alone.
func (*UserManifests) Dependencies() []graph.Asset { return nil }

// Generate implements graph.Asset: kiln adds nothing of its own.
func (u *UserManifests) Generate(context.Context, graph.Parents) error {
	u.FileList = nil
	return nil
}

// retiredKubeadminPath is the kubeadmin Secret an earlier kiln wrote to
// manifests/; a --dir made by it may still hold the file. It is kiln's, not
// the user's, and it carries a hash nothing reads: Load skips it, and it is
// never applied.
const retiredKubeadminPath = ManifestsDir + "/04-kubeadmin.yaml"

// Load implements graph.WritableAsset: every file of manifests/ that is not
// one of kiln's own (nor one an earlier kiln wrote and this one retired),
// each checked as Kubernetes objects. While manifests/ holds any such file,
// what it holds is the set (a user file deleted from there is dropped);
// once it is gone (ignition-configs consumed it) the state file's set is
// used.
func (u *UserManifests) Load(f graph.FileFetcher) (bool, error) {
	names, err := f.Names(ManifestsDir + "/*")
	if err != nil {
		return false, err
	}
	names = slices.DeleteFunc(names, func(n string) bool {
		base := path.Base(n)
		return strings.HasPrefix(base, ".") || strings.HasSuffix(base, "~") || // an editor's hidden or backup file
			n == retiredKubeadminPath
	})
	if len(names) == 0 {
		return false, nil
	}
	own := ownObjectPaths()
	u.FileList = []*graph.File{}
	for _, n := range names {
		base := path.Base(n)
		if slices.Contains(own, n) {
			continue
		}
		if !isManifestName(base) {
			return false, fileError(n, 0, fmt.Errorf("is not applied: bootkube applies only .yaml, .yml and .json files; rename it or move it out of %s/", ManifestsDir))
		}
		file, err := f.FetchByName(n)
		if err != nil {
			return false, err
		}
		if err := CheckObjects(file); err != nil {
			return false, err
		}
		u.FileList = append(u.FileList, file)
	}
	return true, nil
}

// Paths lists the files, for log lines.
func (u *UserManifests) Paths() []string {
	out := make([]string, len(u.FileList))
	for i, f := range u.FileList {
		out[i] = f.Path
	}
	return out
}

// isManifestName tells whether kubectl apply -f <dir> reads a file so named.
func isManifestName(base string) bool {
	switch path.Ext(base) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ownObjectPaths are the files of manifests/ that Objects write: one per
// template of data/manifests/cluster, the bootstrap token Secret, the
// machine inventory and the kubelet serving CA bundle.
func ownObjectPaths() []string {
	templates, _ := fs.Glob(manifestfs.FS, "cluster/*") // the pattern is valid
	return append(targetPaths(ManifestsDir, templates), bootstrapTokenPath, machinesPath, kubeletServingCAPath)
}
