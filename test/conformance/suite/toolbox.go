package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
	"github.com/kiln-project/kiln/platforms/nodeimage"
)

// toolboxPackages are added to debootstrap's minbase for the conformance
// test images built from Debian: the tools the specs run inside agnhost
// pods (the upstream image adds the same from Alpine), nginx and dig for
// the DNS specs' "jessie" prober. The busybox image is not built from it
// (busybox.go says why).
var toolboxPackages = [...]string{
	"curl",            // agnhost pods: HTTP checks of services
	"dnsutils",        // dig and nslookup: DNS specs, agnhost pods
	"netcat-openbsd",  // nc: service and port checks from agnhost pods
	"iproute2",        // ip and ss inside agnhost pods
	"iputils-ping",    // ping
	"iperf",           // agnhost's iperf server
	"nginx-light",     // the nginx images
	"procps",          // ps, pkill
	"ca-certificates", // TLS clients inside the images
}

// toolboxKey names the Debian tree of the conformance images.
func toolboxKey() string {
	h := nodeimage.NewHasher("conformance-toolbox/v1")
	h.Add("suite", release.DebianSuite)
	h.Add("variant", "minbase")
	h.Add("packages", strings.Join(toolboxPackages[:], ","))
	return h.Sum()
}

// mirrorFile records, next to the tree, the mirror it came from; written
// last, it marks the cache entry complete (as the node image's base tree
// does).
const mirrorFile = "mirror"

// toolboxCmd is the debootstrap of the conformance images' Debian tree.
func toolboxCmd(mirror, dir string) nodeimage.Command {
	return nodeimage.Command{
		Path: "debootstrap",
		Args: []string{"--variant=minbase", "--include=" + strings.Join(toolboxPackages[:], ","), release.DebianSuite, dir, mirror},
	}
}

// ensureToolbox returns the conformance images' Debian tree, bootstrapping
// it from the host's apt mirror unless it is cached.
func (b *builder) ensureToolbox(ctx context.Context) (string, error) {
	dir := filepath.Join(b.CacheDir(), "conformance", "debian-"+toolboxKey())
	rootfs := filepath.Join(dir, "rootfs")
	if exists(filepath.Join(dir, mirrorFile)) {
		b.Log().Debugf("conformance toolbox: cached in %s", dir)
		return rootfs, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	mirror, err := b.DebianMirror()
	if err != nil {
		return "", err
	}
	tmp, err := nodeimage.Scratch(dir)
	if err != nil {
		return "", err
	}
	end := b.Progress().Start(fmt.Sprintf("Bootstrapping the test images' Debian %s tree from %s", release.DebianSuite, mirror))
	err = b.Run(ctx, toolboxCmd(mirror, filepath.Join(tmp, "rootfs")), func(line string) {
		if strings.HasPrefix(line, "I: ") {
			b.Progress().Update(strings.TrimPrefix(line, "I: "))
		}
	})
	end(err)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, mirrorFile), []byte(mirror+"\n"), 0o644); err != nil {
		return "", err
	}
	return rootfs, nodeimage.Publish(tmp, dir)
}
