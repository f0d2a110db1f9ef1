package nodeimage

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// LayerEntry is one entry of an image layer.
type LayerEntry struct {
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

// writeLayer writes entries as a tar stream, sorted by name, with every
// parent directory present and fixed owners and times.
func writeLayer(w io.Writer, entries []LayerEntry) error {
	byName := map[string]LayerEntry{}
	for _, e := range entries {
		e.Name = strings.Trim(path.Clean("/"+e.Name), "/")
		if prev, ok := byName[e.Name]; ok && !sameEntry(prev, e) {
			return fmt.Errorf("layer: conflicting entries for /%s", e.Name)
		}
		byName[e.Name] = e
		for d := path.Dir(e.Name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = LayerEntry{Name: d, Dir: true, Mode: 0o755}
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
func sameEntry(a, b LayerEntry) bool {
	return a.Name == b.Name && a.Source == b.Source && a.Link == b.Link && a.Dir == b.Dir &&
		a.Mode == b.Mode && string(a.Data) == string(b.Data)
}

func writeEntry(tw *tar.Writer, e LayerEntry) error {
	switch {
	case e.Source == "" && !e.Dir && e.Link == "":
		return writeFileEntry(tw, e.Name, e.Mode, e.Data)
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

// writeFileEntry writes a regular file holding data.
func writeFileEntry(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(fileHeader(name, mode, int64(len(data)))); err != nil {
		return err
	}
	_, err := tw.Write(data)
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
