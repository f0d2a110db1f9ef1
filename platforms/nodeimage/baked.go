package nodeimage

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/kiln-project/kiln/assets/release"
	datanodeimage "github.com/kiln-project/kiln/data/nodeimage"
)

// bakedFile is a file from data/nodeimage installed into the image.
type bakedFile struct {
	Path string // absolute path in the image
	Data []byte
	Mode os.FileMode
}

// bakedData is what .tmpl files are rendered with.
type bakedData struct {
	SandboxImage string
	CtrImport    string
	CtrList      string
	// ImagesDir is where the container images are: ImagesDir in the
	// image, SysextImagesDir in the node payload.
	ImagesDir string
}

// imageBakedData is what the image's .tmpl files are rendered with.
func imageBakedData() bakedData {
	return bakedData{
		SandboxImage: release.PauseImage(),
		CtrImport:    ctrImportCmd("").String(),
		CtrList:      ctrListCmd().String(),
		ImagesDir:    ImagesDir,
	}
}

// bakedFiles returns the files of data/nodeimage/rootfs, rendered for the
// image.
func bakedFiles() ([]bakedFile, error) {
	return renderBaked(imageBakedData())
}

// renderBaked returns the files of data/nodeimage/rootfs, rendered with
// data.
func renderBaked(data bakedData) ([]bakedFile, error) {
	var out []bakedFile
	err := fs.WalkDir(datanodeimage.FS, "rootfs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := fs.ReadFile(datanodeimage.FS, p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "rootfs")
		if strings.HasSuffix(name, ".tmpl") {
			name = strings.TrimSuffix(name, ".tmpl")
			t, err := template.New(p).Option("missingkey=error").Parse(string(content))
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := t.Execute(&b, data); err != nil {
				return err
			}
			content = b.Bytes()
		}
		mode := os.FileMode(0o644)
		if bytes.HasPrefix(content, []byte("#!")) {
			mode = 0o755
		}
		out = append(out, bakedFile{Path: name, Data: content, Mode: mode})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("data/nodeimage: %w", err)
	}
	return out, nil
}

// ctrImportCmd is how a node imports one image archive into the
// containerd namespace that the CRI (and so kubelet) uses.
func ctrImportCmd(archive string) Command {
	args := []string{"-n", "k8s.io", "images", "import"}
	if archive != "" {
		args = append(args, archive)
	}
	return Command{Path: "ctr", Args: args}
}

// ctrListCmd lists the image references present in that namespace.
func ctrListCmd() Command {
	return Command{Path: "ctr", Args: []string{"-n", "k8s.io", "images", "ls", "-q"}}
}

// installBaked writes files into the tree at rootfs.
func installBaked(rootfs string, files []bakedFile) error {
	for _, f := range files {
		p := filepath.Join(rootfs, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.Mode); err != nil {
			return err
		}
	}
	return nil
}
