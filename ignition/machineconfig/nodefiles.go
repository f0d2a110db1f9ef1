package machineconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"

	igntypes "github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// Paths are where the machine-config agent keeps its state and writes on a
// node, all below Root ("/" on a node; a temporary directory in tests).
type Paths struct {
	// Root is the machine's root directory; no symbolic link below it is
	// ever followed where the agent writes or reads.
	Root string
	// StateDir holds state.json and the originals of files it replaced.
	StateDir string
	// UnitDir is where unit files and drop-ins are written.
	UnitDir string
	// KubeletDropin is the kubelet drop-in's lasting copy, which
	// kubelet.service copies into RunKubeletDropin before every start.
	KubeletDropin string
	// RunKubeletDropin is the drop-in in the kubelet's --config-dir.
	RunKubeletDropin string
}

// NodePaths are the paths on a kiln node.
func NodePaths() Paths {
	return Paths{
		Root:             "/",
		StateDir:         nodelayout.MachineConfigDir,
		UnitDir:          "/etc/systemd/system",
		KubeletDropin:    nodelayout.MachineConfigKubeletDropin,
		RunKubeletDropin: nodelayout.KubeletConfigDir + "/" + nodelayout.MachineConfigKubeletDropinName,
	}
}

// State is what the agent applied, kept in StateDir/state.json.
type State struct {
	// Name is the rendered config applied in full ("" before the first).
	Name string `json:"name"`
	// Pending is the rendered config being applied; drift is not checked
	// while it is set, and the agent applies it again after a restart.
	Pending string `json:"pending,omitempty"`
	// Files are the files written (unit files and drop-ins included), by
	// path, with their content hash and mode.
	Files map[string]FileState `json:"files,omitempty"`
	// Units are the units whose enablement the config sets.
	Units map[string]UnitState `json:"units,omitempty"`
	// Originals records, for every path the agent manages, whether a file
	// was there before it first wrote it (its copy is in StateDir/orig).
	Originals map[string]bool `json:"originals,omitempty"`
	// CreatedDirs are the directories the agent created (for a file, or
	// named by the config); each is removed, once empty, when no path of
	// the config needs it any more.
	CreatedDirs []string `json:"createdDirs,omitempty"`
}

// FileState is one written file.
type FileState struct {
	SHA256 string      `json:"sha256"`
	Mode   fs.FileMode `json:"mode"`
}

// UnitState is a unit of the config.
type UnitState struct {
	// Enabled is the config's enabled field (nil: left as it is).
	Enabled *bool `json:"enabled,omitempty"`
	// Files are the unit file and drop-ins written for it.
	Files []string `json:"files"`
}

// Plan is what a rendered config puts on a node.
type Plan struct {
	// Files are the files to have (unit files, drop-ins and the kubelet
	// drop-in included), by path.
	Files map[string]File
	// Dirs are the directories the config names, with their modes.
	Dirs map[string]fs.FileMode
	// Units are the units the config names.
	Units map[string]UnitState
}

// File is one file's content and mode.
type File struct {
	Data []byte
	Mode fs.FileMode
}

// PlanFor turns r into the files, directories and units to have on a
// machine of paths p.
func PlanFor(p Paths, r *Rendered) (*Plan, error) {
	pl := &Plan{Files: map[string]File{}, Dirs: map[string]fs.FileMode{}, Units: map[string]UnitState{}}
	for _, f := range r.Config.Storage.Files {
		data, err := contents(f.Contents)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		pl.Files[path.Clean(f.Path)] = File{Data: data, Mode: modeOr(f.Mode, 0o644)}
	}
	for _, d := range r.Config.Storage.Directories {
		pl.Dirs[path.Clean(d.Path)] = modeOr(d.Mode, 0o755)
	}
	for _, u := range r.Config.Systemd.Units {
		us := UnitState{Enabled: u.Enabled, Files: []string{}}
		if u.Contents != nil {
			f := path.Join(p.UnitDir, u.Name)
			pl.Files[f] = File{Data: []byte(*u.Contents), Mode: 0o644}
			us.Files = append(us.Files, f)
		}
		for _, d := range u.Dropins {
			f := path.Join(p.UnitDir, u.Name+".d", d.Name)
			pl.Files[f] = File{Data: []byte(strOr(d.Contents)), Mode: 0o644}
			us.Files = append(us.Files, f)
		}
		pl.Units[u.Name] = us
	}
	dropin, err := r.KubeletDropin()
	if err != nil {
		return nil, err
	}
	if dropin != nil {
		pl.Files[p.KubeletDropin] = File{Data: dropin, Mode: 0o600}
	}
	return pl, nil
}

// contents decodes a file's data: URL (Render accepted only those).
func contents(c igntypes.Resource) ([]byte, error) {
	if c.Source == nil {
		return []byte{}, nil
	}
	u, err := dataurl.DecodeString(*c.Source)
	if err != nil {
		return nil, err
	}
	return u.Data, nil
}

func modeOr(m *int, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m).Perm()
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Sum is the hex SHA-256 of data, as State records files.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// StateFile is the agent's record of what it applied, below Root.
func (p Paths) StateFile() string {
	return path.Join(p.StateDir, path.Base(nodelayout.MachineConfigState))
}

// Orig is where the agent keeps the original of name, below Root.
func (p Paths) Orig(name string) string { return path.Join(p.StateDir, "orig", Sum([]byte(name))) }
