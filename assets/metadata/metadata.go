// Package metadata is the metadata.json asset: what `kiln destroy cluster`
// needs to find a cluster's infrastructure even without Terraform state.
package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/internal/adopted"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*Metadata)(nil)

// Content is the content of metadata.json.
type Content struct {
	// ClusterName is metadata.name of the install-config.
	ClusterName string `json:"clusterName"`
	// ClusterID is the cluster's UUID.
	ClusterID string `json:"clusterID"`
	// InfraID prefixes the names of every piece of the cluster's infrastructure.
	InfraID string `json:"infraID"`
	// PlatformName is the platform the cluster runs on.
	PlatformName string `json:"platform"`
	// KubernetesVersion is the Kubernetes release the cluster was created
	// with (install-config kubernetesVersion); empty in the metadata of a
	// cluster made before kiln pinned more than one release, which runs
	// the then only release, the first kiln pinned (v1.36.3).
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Platform is the platform section of the install-config, with defaults.
	types.Platform `json:",inline"`
}

// Metadata is metadata.json.
type Metadata struct {
	Content Content     `json:"content"`
	File    *graph.File `json:"file"`
}

// ID implements graph.Asset.
func (*Metadata) ID() string { return "metadata" }

// Name implements graph.Asset.
func (*Metadata) Name() string { return "cluster metadata" }

// Dependencies implements graph.Asset.
func (*Metadata) Dependencies() []graph.Asset {
	return []graph.Asset{&installconfig.InstallConfig{}, &clusterid.ClusterID{}}
}

// Generate implements graph.Asset.
func (m *Metadata) Generate(_ context.Context, p graph.Parents) error {
	ic, cid := &installconfig.InstallConfig{}, &clusterid.ClusterID{}
	if err := p.Get(ic, cid); err != nil {
		return err
	}
	res, err := ic.Resolved()
	if err != nil {
		return err
	}
	m.Content = Content{
		ClusterName:       ic.Config.Metadata.Name,
		ClusterID:         cid.UUID,
		InfraID:           cid.InfraID,
		PlatformName:      ic.Config.PlatformName(),
		KubernetesVersion: res.Release.Kubernetes,
		Platform:          ic.Config.Platform,
	}
	data, err := json.MarshalIndent(m.Content, "", "  ")
	if err != nil {
		return err
	}
	m.File = &graph.File{Path: installdir.Metadata, Data: append(data, '\n')}
	return nil
}

// Files implements graph.WritableAsset.
func (m *Metadata) Files() []*graph.File { return []*graph.File{m.File} }

// Load implements graph.WritableAsset.
func (m *Metadata) Load(f graph.FileFetcher) (bool, error) {
	file, err := f.FetchByName(installdir.Metadata)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c, err := Parse(file.Data)
	if err != nil {
		return false, &graph.InputError{Err: err}
	}
	m.Content, m.File = c, file
	return true, nil
}

// CheckAdopted implements graph.AdoptionChecker: a metadata.json in --dir
// must name this cluster, its cluster ID and its infra ID, or `kiln destroy
// cluster` would destroy another cluster's machines.
func (m *Metadata) CheckAdopted(_ context.Context, p graph.Parents) error {
	c, err := adopted.From(p, &installconfig.InstallConfig{}, &clusterid.ClusterID{})
	if err != nil {
		return err
	}
	return c.Check(m.File)
}

// Parse reads metadata.json.
func Parse(data []byte) (Content, error) {
	var c Content
	if err := json.Unmarshal(data, &c); err != nil {
		return Content{}, fmt.Errorf("%s: %w", installdir.Metadata, err)
	}
	if c.InfraID == "" {
		return Content{}, fmt.Errorf("%s: infraID is empty", installdir.Metadata)
	}
	return c, nil
}
