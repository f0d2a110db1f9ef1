#!/usr/bin/env bash
# Builds (or reuses) the base of `make host-test`'s virtual machine: a Debian
# 12 (bookworm) root tree made with debootstrap from Debian packages only -
# the stock kernel (linux-image-amd64), systemd as PID 1, cgroup v2 (Debian
# 12's default) and the packages kiln's local platform needs at run time -
# with the kernel and initrd beside it for qemu's direct kernel boot.
#
#   test/host/build-vm.sh            prints the base's directory
#   test/host/build-vm.sh --cached   the same when the base is built, else
#                                    prints nothing and exits 3
#
# The base lives in <cache>/vm/base-<key>/ (<cache> is $KILN_CACHE_DIR, else
# $XDG_CACHE_HOME/kiln, else ~/.cache/kiln): rootfs/, vmlinuz, initrd.img and
# vm.json. <key> hashes this script (package list, configuration) and the
# Debian mirror, the first bookworm "deb" source of the host's apt, as the node
# image build uses (platforms/nodeimage/mirror.go): the base is rebuilt
# only when one of them changes. Needs root and debootstrap.
set -euo pipefail
suite=bookworm
# What a user's Debian 12 host has: the base system with its stock kernel and
# systemd, and the run-time part of the Makefile's HOST_PACKAGES (not the
# node image's build tools: nothing is built inside the VM, and no Go).
# curl is for the test's requests to a Service; tini is the PID 1 of the
# second boot mode, without systemd (host-test-vm-init below).
packages=(
  linux-image-amd64 initramfs-tools systemd systemd-sysv udev dbus kmod
  systemd-container iproute2 iptables ca-certificates zstd procps curl tini
)

cache=${KILN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}

# The mirror as apt itself reads its sources: the first deb source of $suite.
mirror=${KILN_VM_MIRROR:-$(apt-get indextargets --format '$(SITE) $(RELEASE) $(TARGET_OF)' |
  awk -v s="$suite" '$2 == s && $3 == "deb" { print $1; exit }')}
[ -n "$mirror" ] || { echo "build-vm: no $suite deb source in the host's apt sources (set KILN_VM_MIRROR)" >&2; exit 2; }
mirror=${mirror%/}

key=$( { cat "$0"; echo "mirror=$mirror"; } | sha256sum | cut -c1-16)
dir=$cache/vm/base-$key
if [ -f "$dir/vm.json" ]; then
  echo "$dir"
  exit 0
fi
[ "${1:-}" != --cached ] || exit 3
[ "$(id -u)" = 0 ] || { echo "build-vm: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "build-vm: debootstrap missing: apt-get install debootstrap" >&2; exit 2; }

start=$(date +%s)
tmp=$dir.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
echo "build-vm: debootstrap $suite from $mirror into $tmp/rootfs" >&2
include=$(IFS=,; echo "${packages[*]}")
nice debootstrap --variant=minbase --include="$include" "$suite" "$tmp/rootfs" "$mirror" > "$tmp/debootstrap.log" 2>&1 ||
  { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }

root=$tmp/rootfs
echo kiln-vm > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 kiln-vm\n' > "$root/etc/hosts"
# The root is the first virtio disk (an overlay of the built image per run).
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > "$root/etc/fstab"
# The same sources as the build, so apt inside works like a user's (it has
# no network, though: nothing is installed at run time).
echo "deb $mirror $suite main" > "$root/etc/apt/sources.list"
# No password: nobody logs in; the test runs as a unit and powers off.
mkdir -p "$root/etc/systemd/system"
# A machine on the serial console, not a login prompt.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$root/etc/systemd/system/getty@tty1.service"
# The test: kiln.run=<path> on the kernel command line names a script on the
# 9p share (mount tag "host", mounted at /mnt/host). The VM powers off when it
# ends, whatever its result (the script writes its result to the share).
mkdir -p "$root/usr/local/sbin"
cat > "$root/usr/local/sbin/host-test-vm-run" <<'RUN'
#!/bin/bash
mkdir -p /mnt/host
mountpoint -q /mnt/host || mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none host /mnt/host || exit 1
for a in $(cat /proc/cmdline); do
  case $a in kiln.run=*) exec /bin/bash "/mnt/host/${a#kiln.run=}" ;; esac
done
echo "host-test-vm-run: no kiln.run= on the kernel command line" >&2
exit 1
RUN
chmod 755 "$root/usr/local/sbin/host-test-vm-run"
cat > "$root/etc/systemd/system/host-test-vm-run.service" <<'EOF'
[Unit]
Description=Run the script the kernel command line names (kiln.run=) from the host's 9p share
ConditionKernelCommandLine=kiln.run
After=multi-user.target
Wants=multi-user.target
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/host-test-vm-run
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
mkdir -p "$root/etc/systemd/system/multi-user.target.wants" "$root/etc/modules-load.d"
ln -sf ../host-test-vm-run.service "$root/etc/systemd/system/multi-user.target.wants/host-test-vm-run.service"
# 9p and virtio modules load at boot, before the unit mounts the share.
# Nothing else is prepared for kiln: the test does what `make host-prep` does
# after checking that kiln's preflight names it.
printf '9p\n9pnet_virtio\n' > "$root/etc/modules-load.d/host-test-vm.conf"

# The second boot mode: `init=/usr/bin/tini -- /usr/local/sbin/host-test-vm-init`
# gives a pure cgroup v2 host whose PID 1 is not systemd (tini, which reaps
# orphans), where kiln uses its cgroup-v2 launch mode. The script sets up what
# systemd would (file systems, the share's modules, the cgroup2 mount), runs the
# kiln.run= script like host-test-vm-run.service and powers off.
cat > "$root/usr/local/sbin/host-test-vm-init" <<'INIT'
#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mnt() { mountpoint -q "$3" || { mkdir -p "$3"; mount -t "$1" ${4:+-o "$4"} "$2" "$3"; }; }
mnt proc proc /proc
mnt sysfs sysfs /sys
mnt devtmpfs dev /dev
mnt devpts devpts /dev/pts gid=5,mode=620,ptmxmode=000
mnt tmpfs tmpfs /dev/shm
mnt tmpfs tmpfs /run mode=755
mnt tmpfs tmpfs /tmp
mnt cgroup2 cgroup2 /sys/fs/cgroup nsdelegate
mount -o remount,rw /
hostname kiln-vm
ip link set lo up
for m in 9p 9pnet_virtio; do modprobe "$m"; done
echo "host-test-vm-init: PID 1 is $(cat /proc/1/comm); cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)" > /dev/console
/usr/local/sbin/host-test-vm-run > /dev/console 2>&1
sync
umount /mnt/host
echo o > /proc/sysrq-trigger
sleep 60
INIT
chmod 755 "$root/usr/local/sbin/host-test-vm-init"

cp "$root"/boot/vmlinuz-* "$tmp/vmlinuz"
cp "$root"/boot/initrd.img-* "$tmp/initrd.img"
kernel=$(basename "$root"/boot/vmlinuz-*)
secs=$(( $(date +%s) - start ))
cat > "$tmp/vm.json" <<EOF
{
  "key": "$key",
  "suite": "$suite",
  "mirror": "$mirror",
  "kernel": "${kernel#vmlinuz-}",
  "packages": "$(echo "${packages[*]}")",
  "buildSeconds": $secs
}
EOF
mv "$tmp" "$dir"
# Older bases and their disks (test/host/run.sh) are this script's: remove them.
for old in "$cache"/vm/base-*; do
  [ "$old" = "$dir" ] || rm -rf "$old" "$cache/vm/disk-${old##*/base-}"-*.img
done
echo "build-vm: built $dir in ${secs}s" >&2
echo "$dir"
