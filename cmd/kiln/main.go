// Command kiln is a declarative installer for Kubernetes clusters.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:]))
}
