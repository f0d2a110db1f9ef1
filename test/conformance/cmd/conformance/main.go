// Command conformance is the helper of the conformance tooling that
// test/conformance/run.sh calls (make e2e runs its build as bin/conformance):
//
//	conformance focus MODE               print the ginkgo focus regexp of MODE
//	conformance skip (MODE)              print the ginkgo skip regexp of MODE's specs that cannot run here
//	conformance summary DIR (FOCUS (LABEL))
//	                                     print "LABEL: P passed, F failed, S skipped of N"
//	                                     (LABEL default "conformance") from DIR's JUnit reports,
//	                                     then each failed spec; exit 1 when a spec or a suite node
//	                                     failed. FOCUS (default every conformance spec) selects the
//	                                     specs counted.
//	conformance build [--env] [--cache-dir DIR] [--kubernetes-version V] [--dir D]
//	                                     build e2e.test, kubectl, ginkgo and the test images of
//	                                     release V (default the pinned one) into the kiln cache,
//	                                     or find them there (test/conformance/suite), and print
//	                                     where they are; --env prints E2E_TEST=, KUBECTL=,
//	                                     GINKGO= and IMAGES= lines for a shell to eval. Building
//	                                     needs root and Go. The debug log is appended to
//	                                     D/.kiln.log (D default .); progress lines go to stderr.
//
// MODE is full or subset (conformance specs) or netpol or netpol-subset
// (the NetworkPolicy specs); "skip" without a MODE means full. Arguments in
// parentheses are optional. Every error exits 2.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/kiln-project/kiln/test/conformance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
}

// mode is what run.sh runs: a focus and the skip of what cannot run.
type mode struct{ focus, skip string }

// modes are the runs run.sh knows.
func modes() map[string]mode {
	return map[string]mode{
		"full":          {conformance.FullFocus, conformance.CannotRunSkip()},
		"subset":        {conformance.SubsetFocus(), conformance.CannotRunSkip()},
		"netpol":        {conformance.NetpolFocus, conformance.NetpolCannotRunSkip()},
		"netpol-subset": {conformance.NetpolSubsetFocus(), conformance.NetpolCannotRunSkip()},
	}
}

func run(ctx context.Context, args []string) error {
	switch {
	case len(args) >= 1 && args[0] == "build":
		return build(ctx, args[1:], os.Stdout, os.Stderr)
	case len(args) == 2 && args[0] == "focus":
		m, ok := modes()[args[1]]
		if !ok {
			return fmt.Errorf("unknown mode %q", args[1])
		}
		fmt.Println(m.focus)
		return nil
	case (len(args) == 1 || len(args) == 2) && args[0] == "skip":
		name := "full"
		if len(args) == 2 {
			name = args[1]
		}
		m, ok := modes()[name]
		if !ok {
			return fmt.Errorf("unknown mode %q", name)
		}
		fmt.Println(m.skip)
		return nil
	case len(args) >= 2 && len(args) <= 4 && args[0] == "summary":
		focus := conformance.FullFocus
		if len(args) >= 3 {
			focus = args[2]
		}
		re, err := regexp.Compile(focus)
		if err != nil {
			return fmt.Errorf("focus: %w", err)
		}
		s, err := conformance.SummarizeDir(args[1], re)
		if err != nil {
			return err
		}
		if len(args) == 4 {
			s.Label = args[3]
		}
		fmt.Println(s)
		for _, f := range s.Failures {
			fmt.Println("  FAILED:", f)
		}
		for _, f := range s.SuiteFailures {
			fmt.Println("  FAILED suite node (no spec after it ran):", f)
		}
		if s.Failed > 0 || len(s.SuiteFailures) > 0 {
			os.Exit(1)
		}
		return nil
	}
	return fmt.Errorf("usage: conformance focus MODE | conformance skip (MODE) | conformance summary DIR (FOCUS (LABEL)) | conformance build [--env] [--cache-dir DIR] [--kubernetes-version V] [--dir D]; MODE: full, subset, netpol, netpol-subset")
}
