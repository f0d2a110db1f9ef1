// Package manifests holds the assets that become --dir/manifests (the
// Kubernetes objects bootkube applies on the bootstrap machine) and
// --dir/static-pods (the control plane's static pods on the bootstrap machine
// and on masters). Each is rendered from a template in data/manifests; a file
// the user edits on disk is used as edited.
package manifests
