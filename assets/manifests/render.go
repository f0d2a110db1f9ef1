package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"text/template"

	manifestfs "github.com/kiln-project/kiln/data/manifests"
	"github.com/kiln-project/kiln/graph"
)

// fileSet is the shared base of the manifest assets: the files an asset
// renders, persisted in the state file.
type fileSet struct {
	// FileList are the rendered (or user-edited) files.
	FileList []*graph.File `json:"files"`
}

// Files implements graph.WritableAsset.
func (s *fileSet) Files() []*graph.File { return s.FileList }

// InputKind implements graph.Sized: manifests and static pods are bounded
// one by one and all together.
func (*fileSet) InputKind() graph.Input { return graph.ManifestInput }

// render renders each template (a path in data/manifests) with data into a
// file at dir/<template's base name>.
func (s *fileSet) render(dir string, data any, templates ...string) error {
	s.FileList = nil
	for _, name := range templates {
		out, err := renderTemplate(name, data)
		if err != nil {
			return err
		}
		s.FileList = append(s.FileList, &graph.File{Path: path.Join(dir, path.Base(name)), Data: out})
	}
	return nil
}

// load reads the asset's files from disk: every one of paths that exists,
// each passed to check. A file the user deleted stays deleted (the object is
// dropped), as long as at least one of the set is present.
func (s *fileSet) load(f graph.FileFetcher, paths []string, check func(*graph.File) error) (bool, error) {
	var found []*graph.File
	for _, p := range paths {
		file, err := f.FetchByName(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if err := check(file); err != nil {
			return false, err
		}
		found = append(found, file)
	}
	if len(found) == 0 {
		return false, nil
	}
	s.FileList = found
	return true, nil
}

// File returns the data of the file whose base name is name.
func (s *fileSet) File(name string) ([]byte, bool) {
	for _, f := range s.FileList {
		if path.Base(f.Path) == name {
			return f.Data, true
		}
	}
	return nil, false
}

// renderTemplate renders one template of data/manifests; a missing value is
// an error, not an empty string.
func renderTemplate(name string, data any) ([]byte, error) {
	src, err := fs.ReadFile(manifestfs.FS, name)
	if err != nil {
		return nil, err
	}
	t, err := template.New(path.Base(name)).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// targetPaths returns dir/<base> for each template.
func targetPaths(dir string, templates []string) []string {
	out := make([]string, len(templates))
	for i, t := range templates {
		out[i] = path.Join(dir, path.Base(t))
	}
	return out
}
