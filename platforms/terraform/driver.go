package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Stages of a cluster, each a root module with its own state, applied in this
// order and destroyed in reverse. The bootstrap stage is destroyed alone once
// the control plane runs on the masters.
const (
	// StageNetwork holds the bridge and the API load balancer.
	StageNetwork = "network"
	// StageBootstrap holds the bootstrap machine.
	StageBootstrap = "bootstrap"
	// StageCluster holds the masters and workers.
	StageCluster = "cluster"
)

// Names of the files the driver keeps under <dir>/.kiln/terraform.
const (
	cliConfigName = "kiln.tfrc"
	mirrorName    = "providers"
	varFileName   = "kiln.tfvars.json"
	stateFileName = "terraform.tfstate"
	lockFileName  = ".terraform.lock.hcl"
	planFileName  = "kiln.tfplan"
)

// DriverOptions configures a Driver.
type DriverOptions struct {
	// Engine is the binary to run (see EnsureEngine).
	Engine *Engine
	// Dir is the cluster's --dir; the driver works in Dir/.kiln/terraform.
	Dir string
	// Modules is the platform's module tree: one directory per stage and
	// *.tf files at its top (shared variables) copied into every stage.
	Modules fs.FS
	// Providers are the providers kiln serves, installed in a filesystem
	// mirror under Dir/.kiln/terraform/providers.
	Providers []Provider
	// Log receives the engine's output line by line at Debug level.
	Log logrus.FieldLogger
}

// Driver runs init, apply and destroy of a platform's stages; each stage has
// its working directory and state file in Dir/.kiln/terraform/<stage>.
// Everything the driver writes there follows no symbolic link below Dir,
// and it refuses to run the engine in a stage directory whose state, lock
// or .terraform is a link (the engine would write through it).
type Driver struct {
	o DriverOptions
	w *atomicfile.Writer
}

// NewDriver returns a Driver.
func NewDriver(o DriverOptions) *Driver {
	return &Driver{o: o, w: &atomicfile.Writer{Root: o.Dir}}
}

// engineFiles are the files and directories the engine itself writes in a
// stage directory, which must not be symbolic links when it starts.
func engineFiles() []string {
	return []string{
		stateFileName, stateFileName + ".backup", ".terraform.tfstate.lock.info",
		lockFileName, ".terraform", planFileName,
	}
}

// root returns Dir/.kiln/terraform.
func (d *Driver) root() string {
	return filepath.Join(d.o.Dir, filepath.FromSlash(installdir.Terraform))
}

// StageDir returns the working directory of stage, which holds its state
// file terraform.tfstate.
func (d *Driver) StageDir(stage string) string {
	return filepath.Join(d.root(), stage)
}

// Apply creates or updates the resources of stage from vars (marshalled to
// the stage's tfvars JSON file, mode 0600: it may hold Ignition secrets).
func (d *Driver) Apply(ctx context.Context, stage string, vars any) error {
	tf, err := d.prepare(ctx, stage, vars)
	if err != nil {
		return err
	}
	return d.run(tf, stage, "apply", func() error {
		return tf.Apply(ctx, d.applyOptions(stage)...)
	})
}

// Plan plans stage with vars, changing nothing, and returns the resources
// that would change, by address, with their actions ("update",
// "delete"+"create" for a replacement, ...). Resources without a change
// are left out.
func (d *Driver) Plan(ctx context.Context, stage string, vars any) (map[string][]string, error) {
	tf, err := d.prepare(ctx, stage, vars)
	if err != nil {
		return nil, err
	}
	planFile := filepath.Join(d.StageDir(stage), planFileName)
	defer d.w.Remove(planFile)
	changes := map[string][]string{}
	err = d.run(tf, stage, "plan", func() error {
		if _, err := tf.Plan(ctx, tfexec.VarFile(filepath.Join(d.StageDir(stage), varFileName)), tfexec.Out(planFile)); err != nil {
			return err
		}
		plan, err := tf.ShowPlanFile(ctx, planFile)
		if err != nil {
			return err
		}
		for _, rc := range plan.ResourceChanges {
			if rc.Change == nil || rc.Change.Actions.NoOp() || rc.Change.Actions.Read() {
				continue
			}
			for _, a := range rc.Change.Actions {
				changes[rc.Address] = append(changes[rc.Address], string(a))
			}
		}
		return nil
	})
	return changes, err
}

// Destroy destroys the resources of stage. A stage that was never applied,
// or is already destroyed, is a no-op.
func (d *Driver) Destroy(ctx context.Context, stage string, vars any) error {
	if _, err := os.Stat(filepath.Join(d.StageDir(stage), stateFileName)); errors.Is(err, fs.ErrNotExist) {
		d.o.Log.Debugf("terraform stage %s has no state: nothing to destroy", stage)
		return nil
	}
	tf, err := d.prepare(ctx, stage, vars)
	if err != nil {
		return err
	}
	return d.run(tf, stage, "destroy", func() error {
		return tf.Destroy(ctx, d.destroyOptions(stage)...)
	})
}

// LastVars reads into vars the variables stage was last applied with; the
// error satisfies errors.Is(err, fs.ErrNotExist) for a stage never applied.
func (d *Driver) LastVars(stage string, vars any) error {
	return LastVars(d.o.Dir, stage, vars)
}

// LastVars reads into vars the variables stage of the cluster in dir was
// last applied with, as Driver.LastVars, with no engine: a cheap read for
// what asks often (the waits' machine states).
func LastVars(dir, stage string, vars any) error {
	data, err := atomicfile.ReadFile(dir, filepath.Join(dir, filepath.FromSlash(installdir.Terraform), stage, varFileName))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, vars)
}

// Validate checks stage's configuration with vars (init, then validate):
// syntax, references, types and the provider's schema.
func (d *Driver) Validate(ctx context.Context, stage string, vars any) error {
	tf, err := d.prepare(ctx, stage, vars)
	if err != nil {
		return err
	}
	return d.run(tf, stage, "validate", func() error {
		out, err := tf.Validate(ctx)
		if err != nil {
			return err
		}
		if !out.Valid {
			var msgs []string
			for _, m := range out.Diagnostics {
				msgs = append(msgs, fmt.Sprintf("%s: %s: %s", m.Severity, m.Summary, m.Detail))
			}
			return fmt.Errorf("invalid configuration: %s", strings.Join(msgs, "; "))
		}
		return nil
	})
}

// applyOptions are the options of `apply` for stage.
func (d *Driver) applyOptions(stage string) []tfexec.ApplyOption {
	return []tfexec.ApplyOption{tfexec.VarFile(filepath.Join(d.StageDir(stage), varFileName))}
}

// destroyOptions are the options of `destroy` for stage.
func (d *Driver) destroyOptions(stage string) []tfexec.DestroyOption {
	return []tfexec.DestroyOption{tfexec.VarFile(filepath.Join(d.StageDir(stage), varFileName))}
}

// initOptions are the options of `init`: no backend configuration other
// than the default local state in the stage directory, never any input.
func (d *Driver) initOptions() []tfexec.InitOption {
	return []tfexec.InitOption{tfexec.Upgrade(false)}
}

// prepare writes the CLI configuration, the provider mirror, the stage's
// module files and tfvars, and runs init.
func (d *Driver) prepare(ctx context.Context, stage string, vars any) (*tfexec.Terraform, error) {
	if err := WriteCLIConfig(d.w, filepath.Join(d.root(), cliConfigName), filepath.Join(d.root(), mirrorName), d.o.Providers); err != nil {
		return nil, fmt.Errorf("write terraform CLI configuration: %w", err)
	}
	dir := d.StageDir(stage)
	if err := unpackStage(d.w, d.o.Modules, stage, dir); err != nil {
		return nil, fmt.Errorf("unpack terraform stage %s: %w", stage, err)
	}
	for _, name := range engineFiles() {
		if err := atomicfile.CheckNoSymlink(d.o.Dir, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	data, err := json.MarshalIndent(vars, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("terraform variables of stage %s: %w", stage, err)
	}
	if err := d.w.Write(filepath.Join(dir, varFileName), data, 0o600); err != nil {
		return nil, err
	}
	// The lock file would pin the hash of the provider script, which names the
	// kiln binary; kiln ships its providers itself, so it starts afresh.
	if err := d.w.Remove(filepath.Join(dir, lockFileName)); err != nil {
		return nil, err
	}
	tf, err := d.newTerraform(stage)
	if err != nil {
		return nil, err
	}
	err = d.run(tf, stage, "init", func() error { return tf.Init(ctx, d.initOptions()...) })
	return tf, err
}

// newTerraform returns a terraform-exec handle for stage with kiln's
// environment and output logging.
func (d *Driver) newTerraform(stage string) (*tfexec.Terraform, error) {
	tf, err := tfexec.NewTerraform(d.StageDir(stage), d.o.Engine.Path)
	if err != nil {
		return nil, err
	}
	if err := tf.SetEnv(engineEnv(os.Environ(), filepath.Join(d.root(), cliConfigName))); err != nil {
		return nil, err
	}
	return tf, nil
}

// run runs one engine command with its output logged, and wraps its error
// once with the stage and command.
func (d *Driver) run(tf *tfexec.Terraform, stage, verb string, f func() error) error {
	ll := newLineLogger(d.o.Log, fmt.Sprintf("%s %s [%s]: ", d.o.Engine.Name, verb, stage))
	tf.SetStdout(ll)
	tf.SetStderr(ll)
	d.o.Log.Debugf("%s %s of stage %s in %s", d.o.Engine.Name, verb, stage, d.StageDir(stage))
	err := func() error {
		defer ll.Close()
		return f()
	}()
	if err != nil {
		return fmt.Errorf("%s %s of stage %s: %w", d.o.Engine.Name, verb, stage, err)
	}
	return nil
}

// unpackStage replaces the *.tf files of dir with those of modules' stage
// directory and its top level, keeping state and other files; w writes them.
func unpackStage(w *atomicfile.Writer, modules fs.FS, stage, dir string) error {
	if err := w.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	old, err := tfFiles(w.Root, dir)
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := w.Remove(f); err != nil {
			return err
		}
	}
	found := false
	for _, src := range []string{".", stage} {
		entries, err := fs.ReadDir(modules, src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".tf") {
				continue
			}
			data, err := fs.ReadFile(modules, path.Join(src, e.Name()))
			if err != nil {
				return err
			}
			if err := w.Write(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
				return err
			}
			found = found || src == stage
		}
	}
	if !found {
		return fmt.Errorf("no *.tf files for stage %q", stage)
	}
	return nil
}

// tfFiles lists the *.tf files in dir, opened without following a link
// below root.
func tfFiles(root, dir string) ([]string, error) {
	d, err := atomicfile.OpenFile(root, dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".tf") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out, nil
}

// Instance is one resource instance recorded in a stage's state.
type Instance struct {
	// Resource is the resource's address without index, e.g.
	// kilnlocal_machine.master.
	Resource string
	// Key is the instance key: nil for a single instance, a float64 for
	// count, a string for for_each.
	Key any
	// Name is the instance's "name" attribute ("" when it has none).
	Name string
	// SchemaVersion is the version of its provider's schema the state
	// was written with.
	SchemaVersion int
	// Attributes are its attributes as the state records them.
	Attributes map[string]any
}

// Address is the instance's full address, e.g. kilnlocal_machine.master[0]
// or kilnlocal_machine.master["demo-master-0"].
func (i Instance) Address() string {
	switch k := i.Key.(type) {
	case float64:
		return fmt.Sprintf("%s[%d]", i.Resource, int(k))
	case string:
		return fmt.Sprintf("%s[%q]", i.Resource, k)
	}
	return i.Resource
}

// Instances reads the managed resource instances recorded in stage's state
// file, without running the engine; a stage never applied has none.
func (d *Driver) Instances(stage string) ([]Instance, error) {
	data, err := os.ReadFile(filepath.Join(d.StageDir(stage), stateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		Resources []struct {
			Mode      string `json:"mode"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				IndexKey      any            `json:"index_key"`
				SchemaVersion int            `json:"schema_version"`
				Attributes    map[string]any `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("state of stage %s: %w", stage, err)
	}
	var out []Instance
	for _, r := range st.Resources {
		if r.Mode != "managed" {
			continue
		}
		for _, in := range r.Instances {
			name, _ := in.Attributes["name"].(string)
			out = append(out, Instance{Resource: r.Type + "." + r.Name, Key: in.IndexKey, Name: name,
				SchemaVersion: in.SchemaVersion, Attributes: in.Attributes})
		}
	}
	return out, nil
}

// Move renames instances in stage's state (`state mv`, one pair
// [from, to] at a time), so that an apply of a configuration that
// addresses them differently keeps them instead of replacing them.
func (d *Driver) Move(ctx context.Context, stage string, vars any, moves [][2]string) error {
	if len(moves) == 0 {
		return nil
	}
	tf, err := d.prepare(ctx, stage, vars)
	if err != nil {
		return err
	}
	return d.run(tf, stage, "state mv", func() error {
		for _, m := range moves {
			if err := tf.StateMv(ctx, m[0], m[1]); err != nil {
				return fmt.Errorf("%s to %s: %w", m[0], m[1], err)
			}
		}
		return nil
	})
}

// EnsureDriver finds or builds the engine (EnsureEngine with b) and returns
// the driver of the cluster in dir, made absolute, running modules with
// the provider that provider returns for that directory.
func EnsureDriver(ctx context.Context, b BuildOptions, dir string, modules fs.FS, provider func(absDir string) Provider) (*Driver, error) {
	eng, err := EnsureEngine(ctx, b)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return NewDriver(DriverOptions{Engine: eng, Dir: abs, Modules: modules, Providers: []Provider{provider(abs)}, Log: b.Log}), nil
}
