package suite

import (
	"context"

	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// writeConformanceImages writes every conformance image into one
// docker-archive at name, each layer stored once however many images share
// it, and returns the image references in table order.
func (b *builder) writeConformanceImages(ctx context.Context, name string, src conformanceSources) ([]string, error) {
	images := conformanceImages()
	// The history line names the command that wrote these layers before
	// the suite moved here (kiln build conformance): kept, so that the
	// images' configs, and so the archive, stay byte for byte the same.
	err := nodeimage.WriteDockerArchive(name, images, func(ln string) ([]nodeimage.LayerEntry, string, error) {
		entries, err := b.conformanceLayer(ctx, ln, src)
		return entries, "kiln build conformance: " + ln, err
	})
	if err != nil {
		return nil, err
	}
	refs := make([]string, len(images))
	for i, img := range images {
		refs[i] = img.Ref
	}
	return refs, nil
}
