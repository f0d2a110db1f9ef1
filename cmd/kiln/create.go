package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/assets/manifests"
	"github.com/kiln-project/kiln/assets/targets"
	"github.com/kiln-project/kiln/graph"
)

// createOptions are the flags every `kiln create` subcommand shares.
type createOptions struct {
	forceRegenerate bool
}

// newCreateCmd is `kiln create <target>`. A further target subcommand (such
// as `cluster`) is added with one create.AddCommand line below.
func newCreateCmd(o *rootOptions) *cobra.Command {
	co := &createOptions{}
	create := &cobra.Command{
		Use:         "create",
		Short:       "Create install-config.yaml, manifests or Ignition configs in --dir",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{lockAnnotation: ""},
	}
	create.PersistentFlags().BoolVar(&co.forceRegenerate, "force-regenerate", false,
		"regenerate files you edited whose own inputs changed too, discarding the edits")
	create.AddCommand(
		newCreateTargetCmd(o, co, targets.InstallConfig(),
			"Create install-config.yaml: validate the one in --dir, read one from standard input, or ask on a terminal"),
		newCreateTargetCmd(o, co, targets.Manifests(), "Create the Kubernetes manifests (edit them before creating Ignition configs)"),
		newCreateTargetCmd(o, co, targets.IgnitionConfigs(), "Create bootstrap.ign, master.ign and worker.ign"),
		newCreateClusterCmd(o, co),
	)
	return create
}

func newCreateTargetCmd(o *rootOptions, co *createOptions, t graph.Target, short string) *cobra.Command {
	return &cobra.Command{
		Use:   t.Name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := o.openStore(co)
			if err != nil {
				return err
			}
			return o.createTarget(cmd.Context(), store, t)
		},
	}
}

// openStore opens --dir's store, the one a command works with for the
// whole of its run; co is nil for the commands that create nothing.
func (o *rootOptions) openStore(co *createOptions) (*graph.Store, error) {
	opts := []graph.Option{graph.WithLogger(o.log), graph.WithRetired(targets.Retired()...)}
	if co != nil {
		opts = append(opts, graph.WithForceRegenerate(co.forceRegenerate))
	}
	return graph.Open(o.dir, opts...)
}

// createTarget generates a target through store and writes it into --dir;
// on any error --dir is left as it was.
func (o *rootOptions) createTarget(ctx context.Context, store *graph.Store, t graph.Target) error {
	if len(t.Assets) == 0 {
		return fmt.Errorf("target %s lists no assets yet", t.Name)
	}
	compileGC()
	ctx = installconfig.WithInput(ctx, o.installConfigInput())
	if err := store.Persist(ctx, t); err != nil {
		return err
	}
	if t.Name == targets.IgnitionConfigs().Name {
		o.logUserManifests(ctx, store)
	}
	var files []string
	for _, a := range t.Assets {
		for _, f := range a.Files() {
			files = append(files, f.Path)
		}
	}
	o.log.Infof("Created %s in %s: %v", t.Name, o.dir, files)
	return nil
}

// compileHeapLimit is the heap size at which a compile command collects
// garbage (see compileGC).
const compileHeapLimit = 512 << 20

// compileGC turns the garbage collector off up to compileHeapLimit for the
// rest of the process: a compile command lives a fraction of a second and
// allocates a few tens of MiB in all, so collecting costs it time (several
// collections with a live heap of 2-5 MiB) and saves nothing worth having.
// The limit keeps a very large input (many user manifests) bounded.
func compileGC() {
	debug.SetMemoryLimit(compileHeapLimit)
	debug.SetGCPercent(-1)
}

// logUserManifests names the manifests the user added that bootstrap.ign
// carries (the store already resolved them for the target).
func (o *rootOptions) logUserManifests(ctx context.Context, store *graph.Store) {
	u := &manifests.UserManifests{}
	if err := store.Fetch(ctx, u); err != nil || len(u.FileList) == 0 {
		return
	}
	o.log.Infof("bootstrap.ign applies %d manifests you added, with kiln's in file-name order: %s",
		len(u.FileList), strings.Join(u.Paths(), ", "))
}

// installConfigInput is where a new install-config comes from: the survey
// on a terminal, else YAML on standard input.
func (o *rootOptions) installConfigInput() installconfig.Input {
	home, _ := os.UserHomeDir()
	in := installconfig.Input{In: o.stdin, Out: o.stderr, HomeDir: home}
	if f, ok := o.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		in.Terminal = true
		in.ReadSecret = func() ([]byte, error) { return term.ReadPassword(int(f.Fd())) }
	}
	return in
}

// writeAll writes b to w, returning the error.
func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}
