// Package types is the schema of install-config.yaml. It has no logic beyond
// small accessors so that platform packages can import it.
package types
