package provision

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

var _ platforms.ImageLoader = (*Provisioner)(nil)

// LoadImageArchive implements platforms.ImageLoader: it imports the archive
// into containerd (namespace k8s.io) of each selected node, one after the
// other, then pushes its images into the cluster's image registry when it
// has one (registry.go), so pods that pull them always find them too.
// Nodes are the masters and workers; the bootstrap machine is not a node.
func (p *Provisioner) LoadImageArchive(ctx context.Context, infraID, path string, nodes []string) error {
	mgr := machine.NewManager(machine.Options{StateRoot: p.StateRoot, Log: p.Env.Log})
	machines, err := mgr.List(ctx, infraID+"-")
	if err != nil {
		return err
	}
	targets, err := selectNodes(infraID, machines, nodes)
	if err != nil {
		return err
	}
	for _, name := range targets {
		end := p.Env.Progress.Start(fmt.Sprintf("Loading %s into %s", filepath.Base(path), name))
		err := mgr.ImportImageArchive(ctx, name, path)
		end(err)
		if err != nil {
			return err
		}
	}
	return p.pushArchive(ctx, infraID, path)
}

// isNode reports whether the machine called name is a Kubernetes node of
// infraID: a master or a worker.
func isNode(infraID, name string) bool {
	_, _, ok := machines.Index(infraID, name)
	return ok
}

// selectNodes returns, sorted, the nodes among machines that want names, or
// every node when want is empty. A wanted name that is not a node of the
// cluster is a *platforms.UnknownNodesError naming the nodes there are.
func selectNodes(infraID string, machines, want []string) ([]string, error) {
	var all []string
	for _, m := range machines {
		if isNode(infraID, m) {
			all = append(all, m)
		}
	}
	slices.Sort(all)
	if len(all) == 0 {
		return nil, fmt.Errorf("cluster %s has no node machines", infraID)
	}
	if len(want) == 0 {
		return all, nil
	}
	var out, unknown []string
	for _, w := range want {
		if !slices.Contains(all, w) {
			unknown = append(unknown, w)
		} else if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if len(unknown) > 0 {
		return nil, &platforms.UnknownNodesError{InfraID: infraID, Unknown: unknown, Nodes: all}
	}
	slices.Sort(out)
	return out, nil
}
