package nodeimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// epoch is the timestamp of every archive entry and image config, so the
// same inputs give byte-identical archives.
var epoch = time.Unix(0, 0).UTC()

// imagePath is the PATH of every image.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// layerEntry is one entry of an image layer.
type layerEntry struct {
	// Name is the path inside the image, without a leading slash.
	Name string
	// Source is the host file whose content a regular file has, unless
	// Data is set.
	Source string
	// Data is a regular file's content when Source is empty.
	Data []byte
	// Link is a symlink's target; empty for files and directories.
	Link string
	// Dir marks a directory.
	Dir bool
	// Mode is the permission bits.
	Mode int64
}

// imageArchive is a single-layer image written as a docker-archive: the
// format `docker save` writes and `ctr images import` reads.
type imageArchive struct {
	Ref        string
	Entrypoint []string
	Entries    []layerEntry
}

// dockerManifest is one item of manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageConfig is the subset of the OCI/Docker image config kiln writes.
type imageConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Created      time.Time       `json:"created"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
	History      []history       `json:"history"`
}

type containerConfig struct {
	Entrypoint []string `json:"Entrypoint"`
	Env        []string `json:"Env"`
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

// write writes the archive to w. The layer is staged in a temporary file
// in tmpDir because its digest must be known before it is stored.
func (a imageArchive) write(w io.Writer, tmpDir string) error {
	layer, err := os.CreateTemp(tmpDir, "layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	digest := sha256.New()
	if err := writeLayer(io.MultiWriter(layer, digest), a.Entries); err != nil {
		return fmt.Errorf("image %s: %w", a.Ref, err)
	}
	size, err := layer.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	layerHex := hex.EncodeToString(digest.Sum(nil))
	config, err := json.Marshal(imageConfig{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      epoch,
		Config:       containerConfig{Entrypoint: a.Entrypoint, Env: []string{imagePath}, WorkingDir: "/"},
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{"sha256:" + layerHex}},
		History:      []history{{Created: epoch, CreatedBy: "kiln build node-image"}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := layerHex + "/layer.tar"
	manifest, err := json.Marshal([]dockerManifest{{Config: configName, RepoTags: []string{a.Ref}, Layers: []string{layerName}}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(dirHeader(layerHex+"/", 0o755)); err != nil {
		return err
	}
	if err := tw.WriteHeader(fileHeader(layerName, 0o644, size)); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(fileHeader(f.name, 0o644, int64(len(f.data)))); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeLayer writes entries as a tar stream, sorted by name, with every
// parent directory present and fixed owners and times.
func writeLayer(w io.Writer, entries []layerEntry) error {
	byName := map[string]layerEntry{}
	for _, e := range entries {
		e.Name = strings.Trim(path.Clean("/"+e.Name), "/")
		if prev, ok := byName[e.Name]; ok && !sameEntry(prev, e) {
			return fmt.Errorf("layer: conflicting entries for /%s", e.Name)
		}
		byName[e.Name] = e
		for d := path.Dir(e.Name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = layerEntry{Name: d, Dir: true, Mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		if err := writeEntry(tw, byName[n]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// sameEntry reports whether a and b describe the same entry.
func sameEntry(a, b layerEntry) bool {
	return a.Name == b.Name && a.Source == b.Source && a.Link == b.Link && a.Dir == b.Dir &&
		a.Mode == b.Mode && string(a.Data) == string(b.Data)
}

func writeEntry(tw *tar.Writer, e layerEntry) error {
	switch {
	case e.Source == "" && !e.Dir && e.Link == "":
		if err := tw.WriteHeader(fileHeader(e.Name, e.Mode, int64(len(e.Data)))); err != nil {
			return err
		}
		_, err := tw.Write(e.Data)
		return err
	case e.Dir:
		return tw.WriteHeader(dirHeader(e.Name+"/", e.Mode))
	case e.Link != "":
		h := fileHeader(e.Name, 0o777, 0)
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		return tw.WriteHeader(h)
	}
	f, err := os.Open(e.Source)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("layer: %s is not a regular file", e.Source)
	}
	if err := tw.WriteHeader(fileHeader(e.Name, e.Mode, st.Size())); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

func fileHeader(name string, mode, size int64) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size,
		ModTime: epoch, Format: tar.FormatPAX,
	}
}

func dirHeader(name string, mode int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX}
}
