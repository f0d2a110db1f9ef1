package mcagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/machineconfig"
)

// Runner runs a command (systemctl) and returns its combined output.
type Runner interface {
	Run(ctx context.Context, argv ...string) ([]byte, error)
}

// applier applies rendered configs on one machine.
type applier struct {
	p   machineconfig.Paths
	w   *atomicfile.Writer
	run Runner
	// kubeletUp waits until the restarted kubelet is healthy (nil: not
	// waited for, in tests).
	kubeletUp func(ctx context.Context) error
}

func newApplier(p machineconfig.Paths, run Runner) *applier {
	return &applier{p: p, w: &atomicfile.Writer{Root: p.Root}, run: run}
}

// full is name below the root.
func (a *applier) full(name string) string { return path.Join(a.p.Root, name) }

// statePath is the state file.
func (a *applier) statePath() string {
	return a.full(a.p.StateFile())
}

// origPath is where the original of name is kept.
func (a *applier) origPath(name string) string {
	return a.full(a.p.Orig(name))
}

// load reads the state; a node that never applied a config has none.
func (a *applier) load() (*machineconfig.State, error) {
	data, err := atomicfile.ReadFile(a.p.Root, a.statePath())
	if errors.Is(err, fs.ErrNotExist) {
		return &machineconfig.State{}, nil
	}
	if err != nil {
		return nil, err
	}
	var s machineconfig.State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", a.statePath(), err)
	}
	return &s, nil
}

// save writes the state (0600).
func (a *applier) save(s *machineconfig.State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return a.w.Write(a.statePath(), data, 0o600)
}

// apply puts r on the node: every file written atomically (a file the
// node had before is kept as an original first, and put back when the
// config stops naming it), units reloaded, enabled or disabled, and only
// the units whose files changed restarted (the kubelet when its drop-in
// changed). The state records the config as pending first, so a restart
// of the agent midway applies it again.
func (a *applier) apply(ctx context.Context, s *machineconfig.State, r *machineconfig.Rendered) error {
	pl, err := machineconfig.PlanFor(a.p, r)
	if err != nil {
		return err
	}
	if s.Originals == nil {
		s.Originals = map[string]bool{}
	}
	// Keep what was there before kiln first writes a path.
	for name := range pl.Files {
		if _, managed := s.Originals[name]; managed {
			continue
		}
		data, err := atomicfile.ReadFile(a.p.Root, a.full(name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			s.Originals[name] = false
		case err != nil:
			return fmt.Errorf("keeping the original of %s: %w", name, err)
		default:
			info, err := atomicfile.Stat(a.p.Root, a.full(name))
			if err != nil {
				return err
			}
			if err := a.w.Write(a.origPath(name), data, info.Mode().Perm()); err != nil {
				return fmt.Errorf("keeping the original of %s: %w", name, err)
			}
			s.Originals[name] = true
		}
	}
	for _, dir := range a.missingDirs(pl) {
		if !slices.Contains(s.CreatedDirs, dir) {
			s.CreatedDirs = append(s.CreatedDirs, dir)
		}
	}
	s.Pending = r.Name
	if err := a.save(s); err != nil {
		return err
	}

	restartDropped, err := a.dropUnits(ctx, s, pl)
	if err != nil {
		return err
	}
	changed := map[string]bool{}
	for _, dir := range slices.Sorted(maps.Keys(pl.Dirs)) {
		if err := a.w.MkdirAll(a.full(dir), pl.Dirs[dir]); err != nil {
			return err
		}
	}
	b := a.w.Batch()
	for name, f := range pl.Files {
		// A file that is already what the config says is neither written
		// nor a change: nothing restarts for it.
		if a.matches(name, machineconfig.FileState{SHA256: machineconfig.Sum(f.Data), Mode: f.Mode}) == nil {
			continue
		}
		changed[name] = true
		if err := b.Write(a.full(name), f.Data, f.Mode); err != nil {
			b.Abort()
			return err
		}
	}
	for name := range s.Files {
		if _, keep := pl.Files[name]; keep {
			continue
		}
		restored, err := a.restoreOriginal(b, s, name)
		if err != nil {
			b.Abort()
			return err
		}
		changed[name] = restored
	}
	if err := b.Commit(); err != nil {
		return err
	}
	for name := range s.Files {
		if _, keep := pl.Files[name]; !keep {
			_ = os.Remove(a.origPath(name))
			delete(s.Originals, name)
		}
	}
	if err := a.systemd(ctx, pl, changed, restartDropped); err != nil {
		return err
	}
	s.CreatedDirs = a.removeUnneededDirs(pl, s.CreatedDirs)

	s.Files = map[string]machineconfig.FileState{}
	for name, f := range pl.Files {
		s.Files[name] = machineconfig.FileState{SHA256: machineconfig.Sum(f.Data), Mode: f.Mode}
	}
	s.Units = pl.Units
	s.Name, s.Pending = r.Name, ""
	return a.save(s)
}

// restoreOriginal puts back what name was before kiln wrote it, or
// removes it when there was nothing; it says whether that changed the
// file (an original equal to the file as it is needs nothing).
func (a *applier) restoreOriginal(b *atomicfile.Batch, s *machineconfig.State, name string) (bool, error) {
	if !s.Originals[name] {
		err := b.Remove(a.full(name))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	data, err := atomicfile.ReadFile(a.p.Root, a.origPath(name))
	if err != nil {
		return false, fmt.Errorf("original of %s: %w", name, err)
	}
	info, err := atomicfile.Stat(a.p.Root, a.origPath(name))
	if err != nil {
		return false, err
	}
	if a.matches(name, machineconfig.FileState{SHA256: machineconfig.Sum(data), Mode: info.Mode().Perm()}) == nil {
		return false, nil
	}
	return true, b.Write(a.full(name), data, info.Mode().Perm())
}

// systemd reloads the manager when a unit file changed, restarts the
// dropped units dropUnits returned, sets the units' enablement, and
// restarts the units (and the kubelet) whose files changed.
func (a *applier) systemd(ctx context.Context, pl *machineconfig.Plan, changed map[string]bool, restartDropped map[string][]string) error {
	systemctl := func(args ...string) error { return a.systemctl(ctx, args...) }
	reload := false
	for name, c := range changed {
		if c && strings.HasPrefix(name, a.p.UnitDir+"/") {
			reload = true
		}
	}
	if reload {
		if err := systemctl("daemon-reload"); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(restartDropped)) {
		if !slices.ContainsFunc(restartDropped[name], func(f string) bool { return changed[f] }) {
			continue
		}
		if err := systemctl("try-restart", name); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pl.Units)) {
		u := pl.Units[name]
		touched := slices.ContainsFunc(u.Files, func(f string) bool { return changed[f] })
		switch {
		case u.Enabled != nil && *u.Enabled:
			if err := systemctl("enable", name); err != nil {
				return err
			}
			verb := "start"
			if touched {
				verb = "restart"
			}
			if err := systemctl(verb, name); err != nil {
				return err
			}
		case u.Enabled != nil:
			if err := systemctl("disable", "--now", name); err != nil {
				return err
			}
		case touched:
			if err := systemctl("try-restart", name); err != nil {
				return err
			}
		}
	}
	if changed[a.p.KubeletDropin] {
		if err := a.syncKubeletDropin(pl); err != nil {
			return err
		}
		if err := systemctl("restart", "kubelet.service"); err != nil {
			return err
		}
		// Done means the kubelet runs the new settings.
		if a.kubeletUp != nil {
			if err := a.kubeletUp(ctx); err != nil {
				return fmt.Errorf("the kubelet after its restart: %w", err)
			}
		}
	}
	return nil
}

// missingDirs are the directories that writing pl creates: the config's
// own and the parents of its files and directories that do not exist.
func (a *applier) missingDirs(pl *machineconfig.Plan) []string {
	var paths []string
	for name := range pl.Files {
		paths = append(paths, path.Dir(name))
	}
	for dir := range pl.Dirs {
		paths = append(paths, dir)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		for d := p; d != "/" && d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			if _, err := atomicfile.Stat(a.p.Root, a.full(d)); errors.Is(err, fs.ErrNotExist) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// removeUnneededDirs removes, deepest first, the created directories no
// path of pl is in or below, when they are empty; it returns those kept.
func (a *applier) removeUnneededDirs(pl *machineconfig.Plan, created []string) []string {
	needed := func(dir string) bool {
		in := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
		for name := range pl.Files {
			if in(name) {
				return true
			}
		}
		for d := range pl.Dirs {
			if in(d) {
				return true
			}
		}
		return false
	}
	sorted := slices.Clone(created)
	slices.SortFunc(sorted, func(x, y string) int { return strings.Compare(y, x) }) // children first
	var kept []string
	for _, dir := range sorted {
		if needed(dir) {
			kept = append(kept, dir)
			continue
		}
		if err := a.w.Remove(a.full(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			kept = append(kept, dir) // not empty: something else is in it now
		}
	}
	slices.Sort(kept)
	return kept
}

// Revert takes back everything the agent applied on this machine, as an
// empty rendered config would: files put back as the node had them or
// removed, units it created stopped and removed, directories it created
// removed. A reset of an ssh host runs it before its own.
func Revert(ctx context.Context, p machineconfig.Paths, run Runner) error {
	a := newApplier(p, run)
	s, err := a.load()
	if err != nil {
		return err
	}
	if s.Name == "" && s.Pending == "" && len(s.Files) == 0 && len(s.CreatedDirs) == 0 {
		return nil
	}
	empty, err := machineconfig.Render("revert", nil)
	if err != nil {
		return err
	}
	return a.apply(ctx, s, empty)
}

// systemctl runs systemctl with args.
func (a *applier) systemctl(ctx context.Context, args ...string) error {
	out, err := a.run.Run(ctx, append([]string{"systemctl"}, args...)...)
	if err != nil {
		return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dropUnits handles the units the new config no longer names, before their
// files go: a unit the config wrote (and the node did not have) or enabled
// is stopped and disabled now, while systemd still has its file; one the
// node has, whose drop-ins or file the config replaced, is returned with
// those files, to be restarted once they are back as they were if that
// changed one of them.
func (a *applier) dropUnits(ctx context.Context, s *machineconfig.State, pl *machineconfig.Plan) (map[string][]string, error) {
	restart := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(s.Units)) {
		if _, keep := pl.Units[name]; keep {
			continue
		}
		old := s.Units[name]
		unitFile := path.Join(a.p.UnitDir, name)
		ours := slices.Contains(old.Files, unitFile) && !s.Originals[unitFile]
		if ours || (old.Enabled != nil && *old.Enabled) {
			if err := a.systemctl(ctx, "disable", "--now", name); err != nil {
				return nil, err
			}
		} else if len(old.Files) > 0 {
			restart[name] = old.Files
		}
	}
	return restart, nil
}

// syncKubeletDropin puts the drop-in into the kubelet's --config-dir (or
// removes it there), as kubelet.service's ExecStartPre does at boot.
func (a *applier) syncKubeletDropin(pl *machineconfig.Plan) error {
	f, ok := pl.Files[a.p.KubeletDropin]
	if !ok {
		err := a.w.Remove(a.full(a.p.RunKubeletDropin))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return a.w.Write(a.full(a.p.RunKubeletDropin), f.Data, f.Mode)
}

// Drift is a managed file that is not what the agent wrote.
type Drift struct {
	// Path is the file.
	Path string
	// What is "content", "mode", "missing" or the error reading it.
	What string
}

// drift compares every file of the state with the disk. A state with a
// pending config has none checked: the agent applies that first.
func (a *applier) drift(s *machineconfig.State) []Drift {
	if s.Pending != "" {
		return nil
	}
	var out []Drift
	for _, name := range slices.Sorted(maps.Keys(s.Files)) {
		if err := a.matches(name, s.Files[name]); err != nil {
			out = append(out, Drift{Path: name, What: err.Error()})
		}
	}
	return out
}

// matches checks one file against what was written.
func (a *applier) matches(name string, want machineconfig.FileState) error {
	data, err := atomicfile.ReadFile(a.p.Root, a.full(name))
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("missing")
	}
	if err != nil {
		return err
	}
	if machineconfig.Sum(data) != want.SHA256 {
		return errors.New("content")
	}
	info, err := atomicfile.Stat(a.p.Root, a.full(name))
	if err != nil {
		return err
	}
	if info.Mode().Perm() != want.Mode {
		return fmt.Errorf("mode %#o, want %#o", info.Mode().Perm(), want.Mode)
	}
	return nil
}
