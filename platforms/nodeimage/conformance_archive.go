package nodeimage

import (
	"context"
	"fmt"
	"path/filepath"
)

// writeConformanceImages writes every conformance image into one
// docker-archive at name, each layer stored once however many images share
// it, and returns the image references in table order.
func (b *builder) writeConformanceImages(ctx context.Context, name string, src conformanceSources) ([]string, error) {
	images := conformanceImages()
	a := newDockerArchive(filepath.Dir(name))
	defer a.close()
	for _, img := range images {
		for _, ln := range img.Layers {
			if a.has(ln) {
				continue
			}
			entries, err := b.conformanceLayer(ctx, ln, src)
			if err == nil {
				err = a.addLayer(ln, "kiln build conformance: "+ln, entries)
			}
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", ln, err)
			}
		}
	}
	if err := a.writeFile(name, images); err != nil {
		return nil, err
	}
	refs := make([]string, len(images))
	for i, img := range images {
		refs[i] = img.Ref
	}
	return refs, nil
}
