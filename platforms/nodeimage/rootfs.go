package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
)

// packages are the Debian packages debootstrap adds to the minbase variant
// (which already has dpkg, apt, coreutils, mount, util-linux, mawk ...).
// Each is here for a reason; keep it that way. containerd and runc are not
// among them: kiln builds them from source (components).
var packages = [...]string{
	"systemd",                     // init of every machine (nspawn --boot)
	"systemd-sysv",                // /sbin/init for systemd-nspawn --boot
	"dbus",                        // systemctl, hostnamed, networkd talk over D-Bus
	"iproute2",                    // ip: debugging and the CNI bridge plugin's peers
	"iptables",                    // kubelet and CNI portmap/bridge masquerade rules
	"nftables",                    // nft: kube-proxy's nftables mode and its cleanup
	"conntrack",                   // kube-proxy clears stale UDP conntrack entries
	"ipset",                       // kube-router's NetworkPolicy sets (copied into its image)
	"ca-certificates",             // TLS to anything outside the cluster PKI
	"containernetworking-plugins", // CNI plugins in /usr/lib/cni (bridge, host-local, portmap, loopback)
	"ignition",                    // applies the machine's Ignition config at first boot
	"procps",                      // ps, sysctl, pkill: debugging, kubelet checks
	"curl",                        // health checks against API/etcd endpoints, debugging
	"less",                        // reading logs on a machine
}

// Packages returns the packages added to debootstrap's minbase variant.
func Packages() []string {
	return append([]string(nil), packages[:]...)
}

// debootstrapCmd returns the debootstrap of the node's base tree into dir.
func debootstrapCmd(mirror, dir string) Command {
	return Command{
		Path: "debootstrap",
		Args: []string{
			"--variant=minbase",
			"--include=" + strings.Join(packages[:], ","),
			release.DebianSuite,
			dir,
			mirror,
		},
	}
}

// debootstrapKey is the cache key of the base tree: suite and packages.
// The mirror is not part of it: every Debian mirror serves the same
// archive. Delete <cache>/debootstrap to pick up package updates.
func debootstrapKey() string {
	h := NewHasher("debootstrap/v1")
	h.Add("suite", release.DebianSuite)
	h.Add("variant", "minbase")
	h.Add("packages", strings.Join(packages[:], ","))
	return h.Sum()
}

// mirrorFile records, next to the base tree, the mirror it came from.
const mirrorFile = "mirror"

// baseJob is the base tree on its way into the cache.
type baseJob struct {
	// Dir is the cache entry.
	Dir string
	// Mirror is the Debian mirror to bootstrap from; "" when the entry is
	// complete.
	Mirror string
}

// rootfs is the base tree's root directory.
func (j baseJob) rootfs() string { return filepath.Join(j.Dir, "rootfs") }

// title is the progress step of the job's debootstrap.
func (j baseJob) title() string {
	return fmt.Sprintf("Bootstrapping Debian %s from %s", release.DebianSuite, j.Mirror)
}

// stageBase returns the base tree's job: the cache entry when complete,
// else the mirror to bootstrap it from, read from the host's apt sources.
func (b *builder) stageBase() (baseJob, error) {
	job, complete := b.baseEntry()
	if complete {
		b.log.Debugf("debootstrap: cached in %s", job.Dir)
		return job, nil
	}
	if err := os.RemoveAll(job.Dir); err != nil { // an incomplete entry
		return job, err
	}
	mirror, err := detectMirror(b.hostRoot, release.DebianSuite)
	if err != nil {
		return job, err
	}
	job.Mirror = mirror
	return job, nil
}

// baseEntry returns the base tree's cache entry and whether it is
// complete.
func (b *builder) baseEntry() (baseJob, bool) {
	job := baseJob{Dir: filepath.Join(b.cache, "debootstrap", debootstrapKey())}
	return job, exists(filepath.Join(job.rootfs(), "usr/bin/systemctl"))
}

// debootstrap runs debootstrap into a scratch directory and publishes it as
// the job's cache entry. Its progress lines ("I: Retrieving ...") go to
// update, when set.
func (b *builder) debootstrap(ctx context.Context, job baseJob, update func(string)) error {
	tmp, err := Scratch(job.Dir)
	if err != nil {
		return err
	}
	run := b.runner(func(line string) {
		if update != nil && strings.HasPrefix(line, "I: ") {
			update(strings.TrimPrefix(line, "I: "))
		}
	})
	if err := run.run(ctx, debootstrapCmd(job.Mirror, filepath.Join(tmp, "rootfs"))); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, mirrorFile), []byte(job.Mirror+"\n"), 0o644); err != nil {
		return err
	}
	return Publish(tmp, job.Dir)
}
