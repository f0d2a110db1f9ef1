package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kiln-project/kiln/assets/installconfig"
	"github.com/kiln-project/kiln/cmd/cluster/exitcode"
	"github.com/kiln-project/kiln/cmd/internal/status"
	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// rootOptions is what every subcommand shares: the directory it works in,
// the logger (console at --log-level, debug file at every level) and the
// progress reporter.
type rootOptions struct {
	dir      string
	logLevel string
	// started is set once a command's own code runs (after cobra parsed
	// and checked the command line).
	started bool
	command string // the command's path, once started
	// dirMissing says --dir did not exist when the command started.
	dirMissing bool
	// leaveDir says the command did nothing in --dir, so the debug log
	// is not written there either.
	leaveDir bool
	log      *logrus.Logger
	debug    *debugLog
	lock     *graph.Lock
	status   *status.Status
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

// run executes kiln with args and returns the process exit code.
func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := &rootOptions{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	return execute(ctx, o, args)
}

// execute runs the command tree with the given streams; tests call it directly.
func execute(ctx context.Context, o *rootOptions, args []string) int {
	o.debug = &debugLog{}
	o.log = newLogger(o.stderr, o.debug)
	o.status = status.New(o.stderr, isTerminal(o.stderr))
	root := newRootCmd(o)
	root.SetArgs(args)
	root.SetIn(o.stdin)
	root.SetOut(o.stdout)
	root.SetErr(o.stderr)
	err := root.ExecuteContext(ctx)
	// What only this function knows classifies the error here; the rest
	// (a lock held, a symbolic link in --dir, bad input) exitcode.Of
	// finds in the error itself.
	switch {
	case err != nil && ctx.Err() != nil:
		err = exitcode.With(exitcode.Interrupted, err)
	case err != nil && !o.started:
		// cobra refused the command line (unknown command, extra argument)
		// before any command ran: a usage error.
		err = exitcode.With(exitcode.Input, err)
	case errors.Is(err, installconfig.ErrNoConfig) && o.dirMissing && o.command != "kiln create install-config":
		err = exitcode.With(exitcode.Input, fmt.Errorf("--dir %s does not exist", o.dir))
	}
	kind := exitcode.Of(err)
	if err != nil {
		o.log.Error(err.Error())
	}
	o.finishDebugLog(err, kind)
	if uerr := o.lock.Unlock(); uerr != nil {
		o.log.Warnf("cannot remove the lock file: %v", uerr)
	}
	return int(kind)
}

func newRootCmd(o *rootOptions) *cobra.Command {
	root := &cobra.Command{
		Use:           "kiln",
		Short:         "Create and destroy Kubernetes clusters from an install-config.yaml",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			o.started, o.command = true, cmd.CommandPath()
			lvl, err := logrus.ParseLevel(o.logLevel)
			if err != nil {
				return exitcode.With(exitcode.Input, fmt.Errorf("--log-level: %w", err))
			}
			o.log.SetLevel(logrus.TraceLevel)
			consoleLevel(o.log, lvl)
			mode := debugLogMode(cmd)
			if mode == debugLogNone || cmd.Annotations[groupAnnotation] != "" {
				o.debug.disable()
				return nil
			}
			st, err := os.Stat(o.dir)
			if err == nil && !st.IsDir() {
				return exitcode.With(exitcode.Input, fmt.Errorf("--dir %s is not a directory", o.dir))
			}
			o.dirMissing = errors.Is(err, fs.ErrNotExist)
			// The debug log is appended to, not replaced: refuse a link
			// there before anything runs, rather than write through it.
			if err := atomicfile.CheckNoSymlink(o.dir, filepath.Join(o.dir, installdir.DebugLog)); err != nil {
				return err
			}
			if mode == debugLogStream {
				o.openDebugLog()
			}
			o.log.Debugf("kiln %s, --dir %s", cmd.CommandPath(), o.dir)
			if locksDir(cmd) {
				l, err := graph.LockDir(o.dir, cmd.CommandPath())
				if err != nil {
					return err
				}
				o.lock = l
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return exitcode.With(exitcode.Input, err)
	})
	root.PersistentFlags().StringVar(&o.dir, "dir", ".", "assets directory")
	root.PersistentFlags().StringVar(&o.logLevel, "log-level", "info", "console log level (debug, info, warn, error)")
	root.AddCommand(
		newVersionCmd(o),
		newBuildCmd(o),
		newCreateCmd(o), newGraphCmd(o), newShowCmd(o), newExplainCmd(o),
		newProviderCmd(o),
		newSSHProviderCmd(o),
		newLBCmd(o),
		newServiceLBCmd(o),
		newNodeCmd(o),
		newDestroyCmd(o), newWaitForCmd(o), newGatherCmd(o), newLoadCmd(o),
		newCertsCmd(o),
		newStopCmd(o), newStartCmd(o), newScaleCmd(o), newUpgradeCmd(o), newBackupCmd(o), newRestoreCmd(o),
		newKubectlCmd(o),
	)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "version", "explain", "graph", "help", "completion":
			setAnnotation(c, debugLogAnnotation, debugLogNone) // they never read or write --dir
		}
	}
	groupsRefuseArgs(root)
	return root
}

// lockAnnotation on a command (or a parent) says it writes --dir, so it
// holds the lock of --dir while it runs: a second kiln on the same --dir
// stops at once with exitcode.Busy instead of mixing two runs' files.
const lockAnnotation = "kiln/locks-dir"

// locksDir tells whether cmd or a parent carries lockAnnotation.
func locksDir(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if _, ok := c.Annotations[lockAnnotation]; ok {
			return true
		}
	}
	return false
}

// groupsRefuseArgs makes every command that only groups subcommands print
// its help when called bare and refuse anything else (`kiln create
// clusterz`): cobra would print the help and succeed.
func groupsRefuseArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groupsRefuseArgs(sub)
	}
	if c.Runnable() || !c.HasSubCommands() || !c.HasParent() {
		return
	}
	c.Args = cobra.NoArgs
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	setAnnotation(c, groupAnnotation, "true")
}

// groupAnnotation marks a command that only groups others; unlike
// debugLogAnnotation it does not pass to the subcommands.
const groupAnnotation = "kiln/group"

func setAnnotation(c *cobra.Command, key, value string) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[key] = value
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
