package nodeimage

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
)

// Pre-importing the container images at assembly.
//
// A machine's containerd root (/var/lib/containerd) is a plain host
// directory seeded from the image's at the machine's first boot (the
// overlayfs snapshotter cannot sit on the machine's overlay root). Without
// this step every machine imports the ~10 image archives with `ctr import`
// at first boot, one by one, before kubelet starts: 35 s on the bootstrap
// and 50 s on a master of a 3+1 cluster on a loaded 2-core host, and 1.1 GiB
// of content and snapshots written (and held in page cache) per machine.
// Importing them once here, with the image's own containerd, configuration
// and import script, lets the machine runtime hard-link the committed
// content and snapshots into each machine instead. kiln-images.service still
// runs at boot and imports whatever is missing, so a machine seeded from an
// older image behaves as before, and so does one whose pre-import failed
// (containerd's overlayfs snapshotter refuses a cache directory on an
// overlayfs, say): assembly then warns and leaves the images to the boot.

// preimportOuter runs in new mount and PID namespaces (unshare), so every
// mount and process it makes ends with it: it gives the image tree ($1)
// /proc, /sys, /run and /tmp and runs $2 chrooted into it.
const preimportOuter = `set -eu
root=$1
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
mkdir -p "$root/var/lib/containerd"
exec chroot "$root" /bin/sh -c "$2"
`

// preimportInner runs inside the image tree, with the node's PATH (kiln
// builds containerd, ctr and runc into /usr/local/bin): it starts the
// image's containerd with the node configuration (the CRI plugin labels the
// images as it does on a node), runs the node's own import script, stops
// containerd cleanly (its databases closed) and removes what is specific to
// this containerd instance (its introspection UUID) or transient.
const preimportInner = `set -eu
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log=/run/kiln-preimport-containerd.log
containerd >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
i=0
until ctr version >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -ge 600 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "containerd did not start:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
` + importScript + `
kill "$pid"
wait "$pid" || true
trap - EXIT
rm -rf /var/lib/containerd/io.containerd.grpc.v1.introspection /var/lib/containerd/tmpmounts
`

// importScript is the node's image import script, as its path inside the
// image.
const importScript = "/usr/local/libexec/kiln/import-images"

// preimportCmd imports the image archives of the tree at rootfs into the
// tree's own containerd root, in private mount and PID namespaces.
func preimportCmd(rootfs string) Command {
	return Command{Path: "unshare", Args: []string{
		"--mount", "--pid", "--fork", "--propagation", "private",
		"sh", "-c", preimportOuter, "kiln-preimport", rootfs, preimportInner,
	}}
}

// preimport runs preimportCmd for the tree at rootfs through run. When it
// fails, it removes what the import left in the tree's containerd root
// and only warns: every machine then imports the images at first boot.
func preimport(ctx context.Context, rootfs string, run func(context.Context, Command) error, log logrus.FieldLogger) error {
	err := run(ctx, preimportCmd(rootfs))
	if err == nil {
		return nil
	}
	log.Warnf("could not import the container images into the node image; every machine will import them at its first boot (slower): %v", err)
	return os.RemoveAll(filepath.Join(rootfs, containerdRoot))
}

// containerdRoot is containerd's root directory in the image.
const containerdRoot = "var/lib/containerd"
