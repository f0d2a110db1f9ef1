package nodeimage

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// writtenLayer is a layer staged in a temporary file with its digest.
type writtenLayer struct {
	file *os.File
	hex  string // sha256 of the uncompressed tar: the diff ID
	size int64
}

// multiConfig is the image config of a conformance image: the node image's
// fields plus Cmd and User, which the upstream test images set.
type multiConfig struct {
	Architecture string         `json:"architecture"`
	OS           string         `json:"os"`
	Created      time.Time      `json:"created"`
	Config       multiRunConfig `json:"config"`
	RootFS       rootFS         `json:"rootfs"`
	History      []history      `json:"history"`
}

type multiRunConfig struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env"`
	User       string   `json:"User,omitempty"`
	WorkingDir string   `json:"WorkingDir"`
}

// writeConformanceImages writes every conformance image into one
// docker-archive at name, each layer stored once however many images share
// it, and returns the image references in table order.
func (b *builder) writeConformanceImages(ctx context.Context, name string, src conformanceSources) ([]string, error) {
	images := conformanceImages()
	layers := map[string]*writtenLayer{}
	defer func() {
		for _, l := range layers {
			l.file.Close()
			os.Remove(l.file.Name())
		}
	}()
	var order []string
	for _, img := range images {
		for _, ln := range img.Layers {
			if layers[ln] != nil {
				continue
			}
			entries, err := b.conformanceLayer(ctx, ln, src)
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", ln, err)
			}
			l, err := stageLayer(filepath.Dir(name), entries)
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", ln, err)
			}
			layers[ln] = l
			order = append(order, ln)
		}
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := writeMultiArchive(f, images, layers, order); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	refs := make([]string, len(images))
	for i, img := range images {
		refs[i] = img.Ref
	}
	return refs, nil
}

// stageLayer writes entries as a layer tar into a temporary file in dir.
func stageLayer(dir string, entries []layerEntry) (*writtenLayer, error) {
	f, err := os.CreateTemp(dir, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	digest := sha256.New()
	if err := writeLayer(io.MultiWriter(f, digest), entries); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &writtenLayer{file: f, hex: hex.EncodeToString(digest.Sum(nil)), size: size}, nil
}

// writeMultiArchive writes a docker-archive holding images: the layers in
// order, one config per image and manifest.json. Layers with equal content
// are stored once.
func writeMultiArchive(w io.Writer, images []testImage, layers map[string]*writtenLayer, order []string) error {
	tw := tar.NewWriter(w)
	stored := map[string]bool{}
	for _, ln := range order {
		l := layers[ln]
		if stored[l.hex] {
			continue
		}
		stored[l.hex] = true
		if err := tw.WriteHeader(dirHeader(l.hex+"/", 0o755)); err != nil {
			return err
		}
		if err := tw.WriteHeader(fileHeader(l.hex+"/layer.tar", 0o644, l.size)); err != nil {
			return err
		}
		if _, err := l.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, l.file, l.size); err != nil {
			return err
		}
	}
	var manifest []dockerManifest
	configs := map[string]bool{}
	for _, img := range images {
		cfg := multiConfig{
			Architecture: runtime.GOARCH, OS: "linux", Created: epoch,
			Config: multiRunConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: []string{imagePath}, User: img.User, WorkingDir: "/"},
			RootFS: rootFS{Type: "layers"},
		}
		var layerNames []string
		for _, ln := range img.Layers {
			l := layers[ln]
			if l == nil {
				return fmt.Errorf("image %s: layer %s was not written", img.Ref, ln)
			}
			cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, "sha256:"+l.hex)
			cfg.History = append(cfg.History, history{Created: epoch, CreatedBy: "kiln build conformance: " + ln})
			layerNames = append(layerNames, l.hex+"/layer.tar")
		}
		data, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		configName := hex.EncodeToString(sum[:]) + ".json"
		if !configs[configName] {
			configs[configName] = true
			if err := tw.WriteHeader(fileHeader(configName, 0o644, int64(len(data)))); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
		manifest = append(manifest, dockerManifest{Config: configName, RepoTags: []string{img.Ref}, Layers: layerNames})
	}
	data, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(fileHeader("manifest.json", 0o644, int64(len(data)))); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	return tw.Close()
}
