// Package butane embeds the Butane sources (variant fcos 1.4.0) of the units
// and small files kiln puts on its machines: common.bu on every machine and
// one file per role. They are Go text/template files, rendered by
// assets/ignitionconfigs (over its nodeValues) before Butane translates them.
// Paths and ports shared with the node agents come from {{ .Layout }}, the
// values of ignition/nodelayout.
package butane

import "embed"

// FS holds the *.bu templates.
//
//go:embed *.bu
var FS embed.FS
