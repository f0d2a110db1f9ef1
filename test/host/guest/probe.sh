# A short look at the VM before a whole run (test/host/run.sh
# test/host/guest/probe.sh): boot time, PID 1, cgroups, the share, kiln
# without Go, the cached node image. Creates nothing.
. /mnt/host/guest/lib.sh
log "boot: $(cut -d' ' -f1 /proc/uptime) s after the kernel started (PID 1 $(cat /proc/1/comm))"
step kernel uname -a
step cgroups sh -c 'stat -fc %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers; cat /proc/self/cgroup; systemd-analyze 2>/dev/null || true'
step kiln-version kiln version
step no-go sh -c '! command -v go'
step mem sh -c 'grep -E "MemTotal|MemAvailable" /proc/meminfo; nproc'
step node-image-cached sh -c 'ls /var/cache/kiln/images; cat /var/cache/kiln/images/*/image.json | head -3'
pass
