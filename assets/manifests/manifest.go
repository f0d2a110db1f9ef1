package manifests

import (
	"context"

	"github.com/kiln-project/kiln/assets/clusterid"
	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/internal/adopted"
	"github.com/kiln-project/kiln/graph"
)

// ManifestsDir is the folder of --dir that holds the cluster's objects.
const ManifestsDir = "manifests"

// objects is the base of an asset rendering one template of
// data/manifests/cluster into ManifestsDir from Values (and extra data).
type objects struct{ fileSet }

// generate renders template with the Values parent and extra fields.
func (o *objects) generate(p graph.Parents, template string, extra func(*Values) any) error {
	v := &Values{}
	if err := p.Get(v); err != nil {
		return err
	}
	var data any = v
	if extra != nil {
		data = extra(v)
	}
	return o.render(ManifestsDir, data, template)
}

// generateIf renders template from the Values parent when enabled says
// so; otherwise the asset holds no file (an add-on switched off).
func (o *objects) generateIf(p graph.Parents, template string, enabled func(*Values) bool) error {
	v := &Values{}
	if err := p.Get(v); err != nil {
		return err
	}
	if !enabled(v) {
		o.FileList = nil
		return nil
	}
	return o.render(ManifestsDir, v, template)
}

// CheckAdopted implements graph.AdoptionChecker for kiln's own manifests:
// one edited in --dir must still name this cluster and its infra ID (the
// cluster-config ConfigMap does).
func (o *objects) CheckAdopted(_ context.Context, p graph.Parents) error {
	c, err := adopted.From(p, &installconfig.InstallConfig{}, &clusterid.ClusterID{})
	if err != nil {
		return err
	}
	for _, f := range o.FileList {
		if err := c.Check(f); err != nil {
			return err
		}
	}
	return nil
}

// loadOne loads the single file rendered from template.
func (o *objects) loadOne(f graph.FileFetcher, template string) (bool, error) {
	return o.load(f, targetPaths(ManifestsDir, []string{template}), CheckObjects)
}

// valuesOnly is the Dependencies of an asset that needs only Values.
func valuesOnly(more ...graph.Asset) []graph.Asset { return append([]graph.Asset{&Values{}}, more...) }
