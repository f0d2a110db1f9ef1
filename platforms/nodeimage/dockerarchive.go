package nodeimage

import (
	"archive/tar"
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

// epoch is the timestamp of every archive entry and image config, so the
// same inputs give byte-identical archives.
var epoch = time.Unix(0, 0).UTC()

// imagePath is the PATH of every image.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ArchiveImage is one image of a docker-archive: its reference, its
// layers by name (bottom first) and its run configuration.
type ArchiveImage struct {
	// Ref is the image's reference (RepoTags).
	Ref string `json:"ref"`
	// Layers name the layers, bottom first.
	Layers []string `json:"layers"`
	// Entrypoint, Cmd and User are the run configuration.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	User       string   `json:"user,omitempty"`
}

// dockerArchive writes images as one docker-archive: the format `docker
// save` writes and `ctr images import` reads (manifest.json, a config per
// image named by its digest, each layer as <diff ID>/layer.tar,
// uncompressed). Each layer is staged in a temporary file, since its
// digest must be known before it is stored, and stored once however many
// images share it. The same inputs give byte-identical archives.
type dockerArchive struct {
	dir    string // where layers are staged
	layers map[string]*stagedLayer
	order  []string // layer names in the order they were added
}

// stagedLayer is a layer tar in a temporary file.
type stagedLayer struct {
	file *os.File
	hex  string // sha256 of the tar: the diff ID
	size int64
	// createdBy is the layer's line of the image history.
	createdBy string
}

// dockerManifest is one item of manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageConfig is the subset of the OCI/Docker image config kiln writes.
type imageConfig struct {
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Created      time.Time `json:"created"`
	Config       runConfig `json:"config"`
	RootFS       rootFS    `json:"rootfs"`
	History      []history `json:"history"`
}

type runConfig struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env"`
	User       string   `json:"User,omitempty"`
	WorkingDir string   `json:"WorkingDir"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by"`
}

// newDockerArchive returns an empty archive staging its layers in dir.
// Close it to remove them.
func newDockerArchive(dir string) *dockerArchive {
	return &dockerArchive{dir: dir, layers: map[string]*stagedLayer{}}
}

// has reports whether the layer called name was added.
func (a *dockerArchive) has(name string) bool { return a.layers[name] != nil }

// addLayer stages entries as the layer called name; createdBy is its line
// in the history of the images that use it.
func (a *dockerArchive) addLayer(name, createdBy string, entries []LayerEntry) error {
	f, err := os.CreateTemp(a.dir, "layer-*.tar")
	if err != nil {
		return err
	}
	l := &stagedLayer{file: f, createdBy: createdBy}
	digest := sha256.New()
	err = writeLayer(io.MultiWriter(f, digest), entries)
	if err == nil {
		l.size, err = f.Seek(0, io.SeekCurrent)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	l.hex = hex.EncodeToString(digest.Sum(nil))
	a.layers[name] = l
	a.order = append(a.order, name)
	return nil
}

// WriteDockerArchive writes images into a new docker-archive at name,
// staging the layers next to it. layer returns the entries of the layer it
// names and the layer's line in the history of the images that use it; it
// is called once a layer, in the order the images name them, however many
// images share the layer.
func WriteDockerArchive(name string, images []ArchiveImage, layer func(name string) (entries []LayerEntry, createdBy string, err error)) error {
	a := newDockerArchive(filepath.Dir(name))
	defer a.close()
	for _, img := range images {
		for _, ln := range img.Layers {
			if a.has(ln) {
				continue
			}
			entries, createdBy, err := layer(ln)
			if err == nil {
				err = a.addLayer(ln, createdBy, entries)
			}
			if err != nil {
				return fmt.Errorf("layer %s: %w", ln, err)
			}
		}
	}
	return a.writeFile(name, images)
}

// close removes the staged layers.
func (a *dockerArchive) close() {
	for _, l := range a.layers {
		l.file.Close()
		os.Remove(l.file.Name())
	}
}

// writeFile writes images into a new file at name.
func (a *dockerArchive) writeFile(name string, images []ArchiveImage) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := a.write(f, images); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// write writes images to w: the layers in the order they were added, each
// content once, then one config per distinct image config and
// manifest.json.
func (a *dockerArchive) write(w io.Writer, images []ArchiveImage) error {
	tw := tar.NewWriter(w)
	stored := map[string]bool{} // the files written
	for _, name := range a.order {
		l := a.layers[name]
		path := l.hex + "/layer.tar"
		if stored[path] {
			continue
		}
		stored[path] = true
		if err := tw.WriteHeader(dirHeader(l.hex+"/", 0o755)); err != nil {
			return err
		}
		if err := tw.WriteHeader(fileHeader(path, 0o644, l.size)); err != nil {
			return err
		}
		if _, err := l.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, l.file, l.size); err != nil {
			return err
		}
	}
	manifest := make([]dockerManifest, 0, len(images))
	for _, img := range images {
		config, layers, err := a.config(img)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(config)
		name := hex.EncodeToString(sum[:]) + ".json"
		if !stored[name] {
			stored[name] = true
			if err := writeFileEntry(tw, name, 0o644, config); err != nil {
				return err
			}
		}
		manifest = append(manifest, dockerManifest{Config: name, RepoTags: []string{img.Ref}, Layers: layers})
	}
	data, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := writeFileEntry(tw, "manifest.json", 0o644, data); err != nil {
		return err
	}
	return tw.Close()
}

// config returns img's config and the archive paths of its layers.
func (a *dockerArchive) config(img ArchiveImage) ([]byte, []string, error) {
	cfg := imageConfig{
		Architecture: runtime.GOARCH, OS: "linux", Created: epoch,
		Config: runConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: []string{imagePath}, User: img.User, WorkingDir: "/"},
		RootFS: rootFS{Type: "layers"},
	}
	var paths []string
	for _, name := range img.Layers {
		l := a.layers[name]
		if l == nil {
			return nil, nil, fmt.Errorf("image %s: layer %s was not added", img.Ref, name)
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, "sha256:"+l.hex)
		cfg.History = append(cfg.History, history{Created: epoch, CreatedBy: l.createdBy})
		paths = append(paths, l.hex+"/layer.tar")
	}
	data, err := json.Marshal(cfg)
	return data, paths, err
}
