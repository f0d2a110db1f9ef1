package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kiln-project/kiln/cmd/internal/status"
	"github.com/kiln-project/kiln/graph"
)

// debugLogName is the debug log kept in --dir.
const debugLogName = ".kiln.log"

// rootOptions is what every subcommand shares: the directory it works in,
// the logger (console at --log-level, debug file at every level) and the
// progress reporter.
type rootOptions struct {
	dir      string
	logLevel string
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
	if err != nil && ctx.Err() != nil {
		err = graph.WithKind(graph.KindInterrupted, err)
	}
	kind := graph.KindOf(err)
	if err != nil {
		o.log.Error(err.Error())
	}
	o.finishDebugLog(err, kind)
	if uerr := o.lock.Unlock(); uerr != nil {
		o.log.Warnf("cannot remove the lock file: %v", uerr)
	}
	if err == nil {
		return 0
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
			lvl, err := logrus.ParseLevel(o.logLevel)
			if err != nil {
				return graph.WithKind(graph.KindInput, fmt.Errorf("--log-level: %w", err))
			}
			o.log.SetLevel(logrus.TraceLevel)
			consoleLevel(o.log, lvl)
			switch debugLogMode(cmd) {
			case debugLogNone:
				o.debug.disable()
			case debugLogStream:
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
		return graph.WithKind(graph.KindInput, err)
	})
	root.PersistentFlags().StringVar(&o.dir, "dir", ".", "assets directory")
	root.PersistentFlags().StringVar(&o.logLevel, "log-level", "info", "console log level (debug, info, warn, error)")
	root.AddCommand(
		newVersionCmd(o),
		newBuildCmd(o),
		newCreateCmd(o), newGraphCmd(o), newShowCmd(o), newExplainCmd(o),
		newProviderCmd(o),
		newLBCmd(o),
		newNodeCmd(o),
		newDestroyCmd(o), newWaitForCmd(o), newGatherCmd(o),
		newCertsCmd(o),
		newStopCmd(o), newStartCmd(o),
	)
	return root
}

// lockAnnotation on a command (or a parent) says it writes --dir, so it
// holds the lock of --dir while it runs: a second kiln on the same --dir
// stops at once with graph.KindBusy instead of mixing two runs' files.
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

func newVersionCmd(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kiln's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(o.stdout, "kiln %s\n", version())
			return nil
		},
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
