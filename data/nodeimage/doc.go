// Package nodeimage holds the files kiln bakes into its node image. The tree
// under rootfs/ mirrors the image's root: rootfs/etc/x lands at /etc/x.
// A file whose name ends in ".tmpl" is a text/template rendered with the
// pinned release (see platforms/nodeimage) and installed without the
// suffix; a file that starts with "#!" is installed executable (0755), every
// other file 0644.
package nodeimage

import "embed"

// FS is the baked tree; its root directory is "rootfs".
//
//go:embed rootfs
var FS embed.FS
