// Package manifests embeds the templates of the Kubernetes objects and static
// pods kiln renders into --dir/manifests and --dir/static-pods. Templates use
// Go text/template syntax over assets/manifests.Values.
package manifests

import "embed"

// FS holds cluster/*.yaml (objects bootkube applies) and static-pods/*.yaml.
//
//go:embed cluster/*.yaml static-pods/*.yaml
var FS embed.FS
