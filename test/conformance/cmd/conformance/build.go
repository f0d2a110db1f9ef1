package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/nodeimage"
	"github.com/kiln-project/kiln/test/conformance/suite"
)

// build is `conformance build`: it builds the conformance suite, or finds
// it in the kiln cache, and prints where it is. Progress lines go to
// stderr; the debug log, with every line the child tools print, is
// appended to --dir's .kiln.log, as kiln's commands keep theirs.
func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("conformance build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := fs.Bool("env", false, "print E2E_TEST=, KUBECTL=, GINKGO= and IMAGES= lines for a shell to read")
	cacheDir := fs.String("cache-dir", "", "kiln cache directory (default $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or ~/.cache/kiln)")
	version := fs.String("kubernetes-version", release.Default().Kubernetes, "the Kubernetes release to build: "+strings.Join(release.Versions(), ", "))
	dir := fs.String("dir", ".", "the directory whose "+installdir.DebugLog+" the debug log is appended to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("build: unexpected argument %q", fs.Arg(0))
	}
	rel, err := release.Lookup(*version)
	if err != nil {
		return fmt.Errorf("--kubernetes-version: %w", err)
	}
	f, err := openDebugLog(*dir)
	if err != nil {
		return fmt.Errorf("the debug log: %w", err)
	}
	defer f.Close()
	log := logrus.New()
	log.SetOutput(f)
	log.SetLevel(logrus.TraceLevel)
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	log.Debugf("conformance build, --dir %s", *dir)
	start := time.Now()
	c, err := suite.EnsureConformance(ctx, nodeimage.Options{CacheDir: *cacheDir, Log: log, Progress: stepLines{stderr}, Release: rel})
	if err != nil {
		log.Error(err.Error())
		return err
	}
	if *env {
		fmt.Fprintf(stdout, "E2E_TEST=%s\nKUBECTL=%s\nGINKGO=%s\nIMAGES=%s\n", c.E2ETest, c.Kubectl, c.Ginkgo, c.Images)
		return nil
	}
	fmt.Fprintf(stdout, "conformance suite %s (%s)\n  e2e.test: %s\n  kubectl: %s\n  images: %s\n    %s\n",
		c.Version, time.Since(start).Round(100*time.Millisecond), c.E2ETest, c.Kubectl, c.Images, strings.Join(c.Refs, "\n    "))
	return nil
}

// openDebugLog opens dir's debug log for appending, creating dir and the
// log (0600) when missing; a symbolic link there is refused.
func openDebugLog(dir string) (*os.File, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, errors.New(dir + " is not a directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return atomicfile.OpenFile(dir, filepath.Join(dir, installdir.DebugLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// stepLines reports build steps as kiln does when its output is not a
// terminal: a line as a step starts, and one with its mark and time as it
// ends. A step's details (each line of a child tool's output) are in the
// debug log only.
type stepLines struct{ w io.Writer }

var _ platforms.Progress = stepLines{}

// Start implements platforms.Progress.
func (p stepLines) Start(title string) func(error) {
	fmt.Fprintf(p.w, " • %s ...\n", title)
	start := time.Now()
	return func(err error) {
		mark := "✓"
		if err != nil {
			mark = "✗"
		}
		fmt.Fprintf(p.w, " %s %s (%s)\n", mark, title, time.Since(start).Round(100*time.Millisecond))
	}
}

// Update implements platforms.Progress; see stepLines.
func (stepLines) Update(string) {}
