#!/usr/bin/env bash
# `make host-test`: runs kiln on a host that is what users have - a Debian 12
# virtual machine with systemd as PID 1 and cgroup v2 (test/host/build-vm.sh) -
# booted under qemu with TCG, with no network to the outside. kiln and the
# cached node image come from this host; nothing is built inside the VM.
#
#   test/host/run.sh [--if-cached] [GUEST_SCRIPT]
#
# --if-cached (make test) runs only when the VM's base is built already, as
# on every machine after its first `make host-test`; otherwise it prints a
# SKIP line and exits 0: under emulation the test takes longer than a cold
# `make test` can add within CI's budget (docs/benchmarks.md).
# GUEST_SCRIPT (default test/host/guest/host-test.sh, the whole test) runs as
# root in the VM at boot; its output goes to the VM's serial console log, its
# result to results/ on the shared directory. The VM powers off when it ends.
#
# Settings: KILN (default bin/kiln), KILN_VM_MEMORY (default 8G), KILN_VM_CPUS
# (default 2), KILN_VM_TIMEOUT (default 100m; 65m with --if-cached, so that
# make test stays inside CI's 90 minutes), KILN_VM_INIT (default systemd;
# "tini" boots the same VM with a PID 1 that is not systemd, see
# docs/local-platform.md), KILN_VM_KEEP=1 keeps the run directory,
# KILN_VM_RUN_DIR (default a new /var/tmp/kiln-host-test.XXXXXX, removed at
# the end; a failed run's console log and results are kept in
# $KILN_CACHE_DIR/host-test-last-failure).
# Needs root, debootstrap, qemu-system-x86 and qemu-utils (make deps-vm).
#
# Prints one line per step ("host-test: ok <step> (<s>)" or "host-test: FAIL
# <step>: <why>"), the times (VM base and disk build, boot, each step) and
# "host-test: PASS" or "host-test: FAIL at <step>"; exits 1 when a step failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
if_cached=
if [ "${1:-}" = --if-cached ]; then if_cached=--cached; shift; fi
vm_timeout=${KILN_VM_TIMEOUT:-$([ -n "$if_cached" ] && echo 65m || echo 100m)}
guest=${1:-test/host/guest/host-test.sh}
kiln=$(realpath "${KILN:-bin/kiln}")
[ -x "$kiln" ] || { echo "host-test: build kiln first: make build" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "host-test: needs root" >&2; exit 2; }
cache=${KILN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# 1. The VM's base: Debian packages only (cached; rebuilt when its inputs change).
for t in qemu-system-x86_64 qemu-img mke2fs; do
  command -v $t >/dev/null || { echo "host-test: $t missing: make deps-vm (apt-get install qemu-system-x86 qemu-utils)" >&2; exit 2; }
done
t0=$(now)
base=$(test/host/build-vm.sh $if_cached) || {
  rc=$?
  [ "$rc" = 3 ] || exit "$rc"
  echo "SKIP: make host-test (kiln in a Debian 12 systemd/cgroup-v2 VM under emulation, about 50 min on these 2-core machines): its VM is not built yet on this machine; run make host-test (or make test-all) once, and make test runs it from then on"
  exit 0
}
t1=$(now)
echo "host-test: VM base $base ($(secs "$t0" "$t1") s)"

# 2. The node image, from kiln's cache (built on this host when missing).
t0=$(now)
img=$("$kiln" build node-image | awk '/rootfs:/ { print $2 }')
img=$(dirname "$img")
t1=$(now)
echo "host-test: node image $img ($(secs "$t0" "$t1") s)"

# 3. The VM's disk: the base tree with the node image in the VM's kiln cache
# (/var/cache/kiln), on the same file system as /var/lib/kiln, as on a user's
# host. One ext4 image per (base, node image), cached; older ones of the same
# base are removed.
basekey=$(basename "$base"); basekey=${basekey#base-}
disk=$cache/vm/disk-$basekey-$(basename "$img").img
t0=$(now)
if [ ! -f "$disk" ]; then
  rm -f "$cache"/vm/disk-"$basekey"-*.img
  stage=$disk.stage
  rm -rf "$stage" "$disk.tmp"
  cp -al "$base/rootfs" "$stage"
  mkdir -p "$stage/var/cache/kiln/images"
  cp -al "$img" "$stage/var/cache/kiln/images/"
  nice mke2fs -q -t ext4 -L kiln-vm -d "$stage" "$disk.tmp" 40G > /dev/null
  rm -rf "$stage"
  mv "$disk.tmp" "$disk"
fi
t1=$(now)
echo "host-test: VM disk $disk ($(secs "$t0" "$t1") s)"

# 4. This run: a copy-on-write overlay of the disk, and the shared directory
# with kiln, the Terraform engine and the guest scripts.
run=${KILN_VM_RUN_DIR:-$(mktemp -d /var/tmp/kiln-host-test.XXXXXX)}
mkdir -p "$run/share/bin" "$run/share/results"
[ -n "${KILN_VM_KEEP:-}" ] || trap 'rm -rf "$run"' EXIT
qemu-img create -q -f qcow2 -F raw -b "$disk" "$run/disk.qcow2"
cp "$kiln" "$run/share/bin/kiln"
engine=$(command -v tofu || command -v terraform || ls "$cache"/engines/*/tofu "$cache"/engines/*/terraform 2>/dev/null | head -1 || true)
[ -n "$engine" ] || { echo "host-test: no OpenTofu or Terraform on PATH or in $cache/engines: run kiln once on this host" >&2; exit 2; }
cp "$engine" "$run/share/bin/"
cp -r test/host/guest "$run/share/"
echo "KILN_NODE_IMAGE_KEY=$(basename "$img")" > "$run/share/env"

init=
case ${KILN_VM_INIT:-systemd} in
  systemd) ;;
  tini) init="init=/usr/bin/tini -- /usr/local/sbin/host-test-vm-init" ;;
  *) echo "host-test: KILN_VM_INIT must be systemd or tini" >&2; exit 2 ;;
esac
echo "host-test: booting the VM (TCG, ${KILN_VM_CPUS:-2} vCPUs, ${KILN_VM_MEMORY:-8G}); console: $run/console.log"
t0=$(now)
set +e
nice -n 10 timeout "$vm_timeout" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -smp "${KILN_VM_CPUS:-2}" -m "${KILN_VM_MEMORY:-8G}" \
  -nodefaults -display none -no-reboot -nic none \
  -serial "file:$run/console.log" \
  -kernel "$base/vmlinuz" -initrd "$base/initrd.img" \
  -append "root=/dev/vda rw console=ttyS0 panic=-1 kiln.run=guest/$(basename "$guest") $init" \
  -drive "file=$run/disk.qcow2,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
  -virtfs "local,path=$run/share,mount_tag=host,security_model=none,id=host" \
  -device virtio-rng-pci
rc=$?
set -e
t1=$(now)
echo "host-test: VM ran $(secs "$t0" "$t1") s (qemu exit $rc)"
[ $rc = 124 ] && echo "host-test: FAIL: the VM did not power off within $vm_timeout"

# 5. The result: the steps the guest recorded.
res=$run/share/results
[ -f "$res/steps" ] && cat "$res/steps"
[ -f "$res/times" ] && sed 's/^/host-test: time /' "$res/times"
if [ -f "$res/result" ] && grep -q '^PASS' "$res/result"; then
  echo "host-test: PASS"
  exit 0
fi
if [ -f "$res/result" ]; then
  echo "host-test: $(cat "$res/result")"
else
  echo "host-test: FAIL: the guest wrote no result (see the console log)"
fi
echo "host-test: last lines of the console log ($run/console.log):"
tail -40 "$run/console.log" | sed 's/^/  /'
# The run directory goes (unless KILN_VM_KEEP): a failure's console log and
# results stay in kiln's cache (root's own directory, not the shared
# /var/tmp), replacing the previous failure's.
if [ -z "${KILN_VM_KEEP:-}" ]; then
  kept=$cache/host-test-last-failure
  rm -rf "$kept"
  mkdir -p "$kept"
  cp "$run/console.log" "$kept/"
  cp -r "$res" "$kept/" 2> /dev/null || true
  echo "host-test: console log and results (each step's log, diag-*.log) kept in $kept"
fi
exit 1
