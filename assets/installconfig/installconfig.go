package installconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/installconfig/types"
	"github.com/kiln-project/kiln/assets/installconfig/types/configs"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

var _ graph.WritableAsset = (*InstallConfig)(nil)

// ID is the install-config asset's ID in the state file.
const ID = "install-config"

// fileMode is install-config.yaml's mode: it may hold a pull secret.
const fileMode fs.FileMode = 0o600

// ErrNoConfig is the error when neither --dir, the state file nor standard
// input gives an install-config; it says how to provide one.
var ErrNoConfig error = &graph.InputError{Err: errors.New("no " + installdir.InstallConfig +
	" in --dir: write one (`kiln explain installconfig` lists the fields), pipe one in " +
	"(`kiln create install-config < my-config.yaml`) or run `kiln create install-config` in a terminal to answer a few questions")}

// InstallConfig is install-config.yaml, defaulted and validated. Config is
// what every other asset reads; File is the defaulted YAML kiln writes;
// Resolved is Config's values resolved once.
type InstallConfig struct {
	// Config is the defaulted, valid configuration.
	Config *types.Config `json:"config"`
	// File is install-config.yaml as kiln writes it back.
	File *graph.File `json:"file"`
	// resolved is Config resolved (types.Config.Resolve) once, when the
	// asset is generated, loaded or restored from the state file;
	// resolveErr is why it did not resolve.
	resolved   types.Resolved
	resolveErr error
}

var _ graph.StateChecker = (*InstallConfig)(nil)

// Resolved returns Config's values resolved once, when the asset was
// generated, loaded or restored: what the assets and the install run read
// instead of parsing Config's strings again.
func (a *InstallConfig) Resolved() (types.Resolved, error) { return a.resolved, a.resolveErr }

// CheckState implements graph.StateChecker: it resolves the restored
// install-config once. A value that does not resolve (a release this kiln
// does not pin) is no fault of the state file: the assets and commands
// that need it get the error from Resolved, and those that do not, such as
// destroy, still find the cluster.
func (a *InstallConfig) CheckState() error {
	if a.Config != nil {
		a.resolved, a.resolveErr = a.Config.Resolve()
	}
	return nil
}

// ID implements graph.Asset.
func (*InstallConfig) ID() string { return ID }

// Name implements graph.Asset.
func (*InstallConfig) Name() string { return "Install Config" }

// InputKind implements graph.Sized.
func (*InstallConfig) InputKind() graph.Input { return graph.InstallConfigInput }

// Dependencies implements graph.Asset: the install-config is the root.
func (*InstallConfig) Dependencies() []graph.Asset { return nil }

// Generate implements graph.Asset. It runs when --dir holds no
// install-config.yaml and the state file none either: it asks the questions
// of the survey on a terminal, or reads YAML from the Input in ctx.
func (a *InstallConfig) Generate(ctx context.Context, _ graph.Parents) error {
	in, ok := inputFrom(ctx)
	if !ok {
		return ErrNoConfig
	}
	if in.Terminal {
		c, err := survey(ctx, in)
		if err != nil {
			return err
		}
		return a.set(c, nil)
	}
	data, err := io.ReadAll(io.LimitReader(in.In, graph.MaxInstallConfigSize+1))
	if err != nil {
		return fmt.Errorf("reading standard input: %w", err)
	}
	if len(data) > graph.MaxInstallConfigSize {
		return &graph.InputError{Err: &graph.SizeError{Path: "standard input", Input: graph.InstallConfigInput,
			Size: int64(len(data)), Limit: graph.MaxInstallConfigSize, Unsized: true}}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return ErrNoConfig
	}
	return a.load(data)
}

// Files implements graph.WritableAsset.
func (a *InstallConfig) Files() []*graph.File {
	if a.File == nil {
		return nil
	}
	return []*graph.File{a.File}
}

// Load implements graph.WritableAsset: it parses, defaults and validates
// install-config.yaml in --dir.
func (a *InstallConfig) Load(f graph.FileFetcher) (bool, error) {
	file, err := f.FetchByName(installdir.InstallConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, a.load(file.Data)
}

// load parses, defaults and validates YAML.
func (a *InstallConfig) load(data []byte) error {
	c, err := Parse(data)
	if c == nil {
		return err
	}
	var shape field.ErrorList
	if ve := (*ValidationError)(nil); errors.As(err, &ve) {
		shape = ve.Errs
	}
	return a.set(c, shape)
}

// set defaults and validates c, then keeps it with its YAML. Problems
// found while parsing come first; validation adds those in other fields.
func (a *InstallConfig) set(c *types.Config, parseErrs field.ErrorList) error {
	plats := configs.Platforms()
	SetDefaults(c, plats)
	errs := parseErrs
	for _, e := range Validate(c, plats) {
		if !slices.ContainsFunc(parseErrs, func(p *field.Error) bool { return strings.HasPrefix(e.Field, p.Field) }) {
			errs = append(errs, e)
		}
	}
	if err := invalid(errs); err != nil {
		return err
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	a.Config = c
	a.File = &graph.File{Path: installdir.InstallConfig, Data: data, Mode: fileMode}
	// Validation accepted c, so it resolves; should it not, the input is
	// at fault.
	if a.resolved, a.resolveErr = c.Resolve(); a.resolveErr != nil {
		return &graph.InputError{Err: a.resolveErr}
	}
	return nil
}

// Redacted returns a copy of c safe to print: the pull secret is replaced.
func Redacted(c *types.Config) *types.Config {
	out := *c
	if out.PullSecret != "" {
		out.PullSecret = "REDACTED"
	}
	if out.Proxy != nil {
		p := *out.Proxy
		p.HTTPProxy, p.HTTPSProxy = redactURL(p.HTTPProxy), redactURL(p.HTTPSProxy)
		out.Proxy = &p
	}
	return &out
}

// ParseDefaulted parses an install-config read from elsewhere than --dir
// and applies the defaults, without the validation Load does: kiln scale
// cluster --config compares it field by field with a cluster's valid
// install-config and refuses any change but the replica counts, and a
// validation against the host would refuse the cluster's own machine
// network, which its bridge now uses.
func ParseDefaulted(data []byte) (*types.Config, error) {
	c, err := Parse(data)
	if err != nil {
		return nil, err
	}
	SetDefaults(c, configs.Platforms())
	return c, nil
}
