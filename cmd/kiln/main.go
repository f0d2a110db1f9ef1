// Command kiln is a declarative installer for Kubernetes clusters.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file to write a CPU profile of the whole command
// into (go tool pprof reads it): a hidden switch for benchmarks
// (docs/benchmarks.md), not a flag, so it covers flag parsing too.
const cpuProfileEnv = "KILN_CPUPROFILE"

func main() {
	stop := startCPUProfile(os.Getenv(cpuProfileEnv))
	code := run(os.Args[1:])
	stop()
	os.Exit(code)
}

// startCPUProfile starts a CPU profile into name, if set, and returns the
// function that finishes it. A profile that cannot be written is reported
// and does not stop the command.
func startCPUProfile(name string) (stop func()) {
	if name == "" {
		return func() {}
	}
	f, err := os.Create(name)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", cpuProfileEnv, err)
		}
	}
}
