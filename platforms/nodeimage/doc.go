// Package nodeimage builds kiln's node image: a Debian root file system
// (debootstrap) with systemd, containerd, runc, the CNI plugins and Ignition,
// plus the cluster's components built from source (see assets/release) and
// their container images as docker-archive tarballs that every node imports
// into containerd at boot.
//
// Ensure builds the image in steps, each cached under the kiln cache
// directory by a content hash of its inputs, so a second call with nothing
// changed returns in seconds:
//
//	<cache>/go/{build,mod}             GOCACHE and GOMODCACHE of component builds
//	<cache>/components/<name>-<hash>/  a wrapper module and its bin/ directory
//	<cache>/debootstrap/<hash>/rootfs  the bare Debian tree
//	<cache>/images/node-<hash>/        rootfs/ (the node image) and image.json
//
// The machine runtime uses Image.RootFS read-only as the lower layer of
// each machine's copy-on-write root.
//
// Toolkit lends the builder's machinery (component builds, commands, cache
// keys and entries, docker-archives) to builds that share the cache:
// test/conformance/suite builds the upstream conformance suite with it.
package nodeimage
