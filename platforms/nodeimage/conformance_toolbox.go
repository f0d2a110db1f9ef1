package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
)

// toolboxPackages are added to debootstrap's minbase for the conformance
// test images built from Debian: the tools the specs run inside agnhost
// pods (the upstream image adds the same from Alpine), nginx and dig for
// the DNS specs' "jessie" prober. The busybox image is not built from it
// (conformance_busybox.go says why).
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
	h := newHasher("conformance-toolbox/v1")
	h.add("suite", release.DebianSuite)
	h.add("variant", "minbase")
	h.add("packages", strings.Join(toolboxPackages[:], ","))
	return h.sum()
}

// toolboxCmd is the debootstrap of the conformance images' Debian tree.
func toolboxCmd(mirror, dir string) command {
	return command{
		Path: "debootstrap",
		Args: []string{"--variant=minbase", "--include=" + strings.Join(toolboxPackages[:], ","), release.DebianSuite, dir, mirror},
	}
}

// ensureToolbox returns the conformance images' Debian tree, bootstrapping
// it from the host's apt mirror unless it is cached.
func (b *builder) ensureToolbox(ctx context.Context) (string, error) {
	dir := filepath.Join(b.cache, "conformance", "debian-"+toolboxKey())
	rootfs := filepath.Join(dir, "rootfs")
	if exists(filepath.Join(dir, mirrorFile)) {
		b.log.Debugf("conformance toolbox: cached in %s", dir)
		return rootfs, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	mirror, err := detectMirror(b.hostRoot, release.DebianSuite)
	if err != nil {
		return "", err
	}
	tmp, err := scratch(dir)
	if err != nil {
		return "", err
	}
	end := b.progress.Start(fmt.Sprintf("Bootstrapping the test images' Debian %s tree from %s", release.DebianSuite, mirror))
	run := runner{log: b.log, update: func(line string) {
		if strings.HasPrefix(line, "I: ") {
			b.progress.Update(strings.TrimPrefix(line, "I: "))
		}
	}}
	err = run.run(ctx, toolboxCmd(mirror, filepath.Join(tmp, "rootfs")))
	end(err)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, mirrorFile), []byte(mirror+"\n"), 0o644); err != nil {
		return "", err
	}
	return rootfs, publish(tmp, dir)
}
