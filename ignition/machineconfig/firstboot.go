package machineconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"

	igntypes "github.com/coreos/ignition/v2/config/v3_3/types"
	"k8s.io/client-go/rest"

	"github.com/kiln-project/kiln/ignition"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// FirstBoot returns base, a machine's full install-time config, with r
// merged in: the machine boots straight into its pool's rendered config
// (Ignition writes the files and units, the kubelet starts with the
// MachineConfigs' drop-in), and its agent starts with a state that says
// so, as if it had applied r itself: it reports r at once, and taking a
// MachineConfig away later puts back what base had at that path (kept as
// the original) or removes what base did not have.
func FirstBoot(base igntypes.Config, r *Rendered) (igntypes.Config, error) {
	p := NodePaths()
	pl, err := PlanFor(p, r)
	if err != nil {
		return igntypes.Config{}, err
	}
	out := ignition.Merge(base, r.Config)
	s := &State{Name: r.Name, Files: map[string]FileState{}, Units: pl.Units, Originals: map[string]bool{}}
	for _, name := range slices.Sorted(maps.Keys(pl.Files)) {
		f := pl.Files[name]
		s.Files[name] = FileState{SHA256: Sum(f.Data), Mode: f.Mode}
		data, mode, had, err := baseFile(base, p, name)
		if err != nil {
			return igntypes.Config{}, err
		}
		s.Originals[name] = had
		if had {
			ignition.AddFile(&out, p.Orig(name), int(mode), data)
		}
	}
	if f, ok := pl.Files[p.KubeletDropin]; ok {
		ignition.AddFile(&out, p.KubeletDropin, int(f.Mode), f.Data)
	}
	state, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return igntypes.Config{}, err
	}
	ignition.AddFile(&out, nodelayout.MachineConfigState, 0o600, state)
	return out, nil
}

// baseFile is what base writes at name: a file of its storage, or a unit
// file or drop-in of its systemd units.
func baseFile(base igntypes.Config, p Paths, name string) (data []byte, mode fs.FileMode, had bool, err error) {
	for _, f := range base.Storage.Files {
		if path.Clean(f.Path) == name {
			data, _, err := ignition.FileContents(base, f.Path)
			if err != nil {
				return nil, 0, false, fmt.Errorf("the install-time config: %w", err)
			}
			return data, modeOr(f.Mode, 0o644), true, nil
		}
	}
	for _, u := range base.Systemd.Units {
		if u.Contents != nil && path.Join(p.UnitDir, u.Name) == name {
			return []byte(*u.Contents), 0o644, true, nil
		}
		for _, d := range u.Dropins {
			if path.Join(p.UnitDir, u.Name+".d", d.Name) == name {
				return []byte(strOr(d.Contents)), 0o644, true, nil
			}
		}
	}
	return nil, 0, false, nil
}

// WithPoolConfig is full (a machine's full config, Ignition JSON) with the
// current rendered config of pool merged in by FirstBoot, read through c
// (a client of the API's root). A cluster without the machine-config API,
// or whose pool has rendered nothing yet, gets full as it is.
func WithPoolConfig(ctx context.Context, c rest.Interface, full []byte, pool string) ([]byte, error) {
	rendered, err := PoolConfig(ctx, c, pool)
	if err != nil || rendered == nil {
		return full, err
	}
	base, err := ignition.Parse(full)
	if err != nil {
		return nil, err
	}
	cfg, err := FirstBoot(base, rendered)
	if err != nil {
		return nil, fmt.Errorf("pool %s's config %s: %w", pool, rendered.Name, err)
	}
	return ignition.Marshal(cfg)
}
