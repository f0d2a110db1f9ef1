// Command conformance is the helper test/conformance/run.sh calls:
//
//	conformance focus full|subset    print the ginkgo focus regexp
//	conformance skip                 print the ginkgo skip regexp of the specs that cannot run here
//	conformance summary DIR (FOCUS)  print "conformance: P passed, F failed, S skipped of N"
//	                                 from DIR's JUnit reports, then each failed spec;
//	                                 exit 1 when a spec or a suite node failed. FOCUS (optional, default
//	                                 every conformance spec) selects the specs counted.
package main

import (
	"fmt"
	"os"
	"regexp"

	"github.com/kiln-project/kiln/test/conformance"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 2 && args[0] == "focus" && args[1] == "full":
		fmt.Println(conformance.FullFocus)
		return nil
	case len(args) == 2 && args[0] == "focus" && args[1] == "subset":
		fmt.Println(conformance.SubsetFocus())
		return nil
	case len(args) == 1 && args[0] == "skip":
		fmt.Println(conformance.CannotRunSkip())
		return nil
	case (len(args) == 2 || len(args) == 3) && args[0] == "summary":
		focus := conformance.FullFocus
		if len(args) == 3 {
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
	return fmt.Errorf("usage: conformance focus full|subset | conformance skip | conformance summary DIR [FOCUS]")
}
