package registry

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// OCI media types of what Push uploads.
const (
	mediaTypeManifest   = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig     = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer      = "application/vnd.oci.image.layer.v1.tar"
	mediaTypeLayerGzip  = mediaTypeLayer + "+gzip"
	mediaTypeLayerZstd  = mediaTypeLayer + "+zstd"
	maxArchiveJSONBytes = 16 << 20
)

// ErrNotDockerArchive means an archive has no manifest.json: it is not a
// docker-archive (`docker save`, `ctr export`, kiln's own archives all
// write one).
var ErrNotDockerArchive = errors.New("no manifest.json: not a docker-archive")

// blob is a piece of an image: its digest, size and media type, and where
// its bytes are.
type blob struct {
	Digest    string
	Size      int64
	MediaType string
	// open returns its bytes.
	open func() io.Reader
}

// image is one image of an archive: every name it is tagged with, its
// config and its layers, in order.
type image struct {
	Refs   []string
	Config blob
	Layers []blob
}

// archive is a docker-archive opened for reading: its members by name,
// located in the file so that each can be read on its own.
type archive struct {
	f       *os.File
	members map[string]member
}

// member is where a file of the archive is.
type member struct {
	offset, size int64
}

// openArchive indexes the regular files of the tar at name.
func openArchive(name string) (*archive, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	a := &archive{f: f, members: map[string]member{}}
	pos := &positionReader{r: f}
	tr := tar.NewReader(pos)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return a, nil
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if h.Typeflag == tar.TypeReg {
			// Next has read the header blocks and nothing more: the
			// content starts here.
			a.members[path.Clean(h.Name)] = member{offset: pos.n, size: h.Size}
		}
	}
}

// Close closes the archive's file.
func (a *archive) Close() error { return a.f.Close() }

// section returns a reader of the member called name.
func (a *archive) section(name string) (*io.SectionReader, error) {
	m, ok := a.members[path.Clean(name)]
	if !ok {
		return nil, fmt.Errorf("the archive has no %s", name)
	}
	return io.NewSectionReader(a.f, m.offset, m.size), nil
}

// readJSON decodes the (small) member called name into v.
func (a *archive) readJSON(name string, v any) ([]byte, error) {
	r, err := a.section(name)
	if err != nil {
		return nil, err
	}
	if r.Size() > maxArchiveJSONBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than a manifest or config holds", name, r.Size())
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

// dockerManifestItem is one image of a docker-archive's manifest.json.
type dockerManifestItem struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageConfig is the part of an image config that names the layers'
// uncompressed digests.
type imageConfig struct {
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// images returns the archive's images. A layer stored uncompressed is
// pushed as it is, under its diff ID; a compressed one keeps its
// compression and takes its digest from its OCI blob name or, failing
// that, from hashing it.
func (a *archive) images() ([]image, error) {
	var items []dockerManifestItem
	if _, ok := a.members["manifest.json"]; !ok {
		return nil, ErrNotDockerArchive
	}
	if _, err := a.readJSON("manifest.json", &items); err != nil {
		return nil, err
	}
	var out []image
	for _, it := range items {
		var cfg imageConfig
		data, err := a.readJSON(it.Config, &cfg)
		if err != nil {
			return nil, err
		}
		if len(cfg.RootFS.DiffIDs) != len(it.Layers) {
			return nil, fmt.Errorf("%s: %d diff IDs for %d layers", it.Config, len(cfg.RootFS.DiffIDs), len(it.Layers))
		}
		sum := sha256.Sum256(data)
		img := image{Refs: it.RepoTags, Config: blob{
			Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data)), MediaType: mediaTypeConfig,
			open: func() io.Reader { return bytes.NewReader(data) },
		}}
		for i, name := range it.Layers {
			l, err := a.layer(name, cfg.RootFS.DiffIDs[i])
			if err != nil {
				return nil, err
			}
			img.Layers = append(img.Layers, l)
		}
		out = append(out, img)
	}
	return out, nil
}

// layer describes the layer member called name, whose uncompressed digest
// is diffID.
func (a *archive) layer(name, diffID string) (blob, error) {
	r, err := a.section(name)
	if err != nil {
		return blob{}, err
	}
	b := blob{Size: r.Size(), open: func() io.Reader { return io.NewSectionReader(r, 0, r.Size()) }}
	var magic [4]byte
	n, _ := r.ReadAt(magic[:], 0)
	switch {
	case n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		b.MediaType = mediaTypeLayerGzip
	case n == 4 && magic == [4]byte{0x28, 0xb5, 0x2f, 0xfd}:
		b.MediaType = mediaTypeLayerZstd
	default:
		b.MediaType, b.Digest = mediaTypeLayer, diffID
		return b, nil
	}
	if hexSum, ok := strings.CutPrefix(path.Clean(name), "blobs/sha256/"); ok && len(hexSum) == sha256.Size*2 {
		b.Digest = "sha256:" + hexSum
		return b, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, b.open()); err != nil {
		return blob{}, fmt.Errorf("%s: %w", name, err)
	}
	b.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return b, nil
}

// positionReader counts the bytes read from (or skipped in) r, so the
// tar reader's position in the file is known. tar.Reader skips a member's
// content with Seek when it can.
type positionReader struct {
	r *os.File
	n int64
}

func (p *positionReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	return n, err
}

func (p *positionReader) Seek(offset int64, whence int) (int64, error) {
	n, err := p.r.Seek(offset, whence)
	if err == nil {
		p.n = n
	}
	return n, err
}
