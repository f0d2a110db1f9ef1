// Package conformance holds the wrapper Go module kiln builds the upstream
// Kubernetes conformance suite from (test/conformance/suite, which
// `conformance build` and `make conformance` run): e2e/go.mod.in, a
// text/template filled with the versions pinned in assets/release, and
// e2e/go.sum.in, the checksums of every module the build needs. It is kept
// apart from data/components so that the node image's inputs, and so its
// cache key, do not change with it.
package conformance

import "embed"

// FS holds the e2e wrapper module.
//
//go:embed e2e
var FS embed.FS
