#!/usr/bin/env bash
# Memory per machine of a local kiln cluster, from each machine's cgroup:
# RSS (anonymous memory of every process in the machine, pods included) and
# page cache, separately, in MiB, with a summary per role (master, worker,
# bootstrap). Page cache is charged to the first machine that reads a page:
# files shared between machines (hard links) are counted once. Usage:
#   test/bench/rss.sh INFRA_ID        # e.g. boot1-z8whe (metadata.json's infraID)
#   test/bench/rss.sh -dir DIR        # the infraID from DIR/metadata.json
# cgroup v1 (memory.stat total_rss, total_cache, total_mapped_file,
# total_shmem) or cgroup v2 (anon, file, file_mapped, shmem).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = -dir ]; then
  infra=$(infra_id "${2:?usage: $0 -dir DIR}")
else
  infra=${1:?usage: $0 INFRA_ID | -dir DIR}
fi
[ -n "$infra" ] || { echo "no infraID found" >&2; exit 2; }
v1=/sys/fs/cgroup/memory/kiln v2=/sys/fs/cgroup/kiln
rows=$(
  for stat in "$v1/$infra"-*/memory.stat "$v2/$infra"-*/memory.stat; do
    [ -f "$stat" ] || continue
    m=$(basename "$(dirname "$stat")")
    role=${m#"$infra"-}
    role=${role%-[0-9]*}
    awk -v m="$m" -v role="$role" '
      { v[$1] = $2 }
      END {
        if ("total_rss" in v) { rss = v["total_rss"]; cache = v["total_cache"]; mapped = v["total_mapped_file"]; shmem = v["total_shmem"] }
        else { rss = v["anon"]; cache = v["file"]; mapped = v["file_mapped"]; shmem = v["shmem"] }
        printf "%-28s %-9s %9.0f %9.0f %9.0f %9.0f\n", m, role, rss / 1048576, cache / 1048576, mapped / 1048576, shmem / 1048576
      }' "$stat"
  done
)
[ -n "$rows" ] || { echo "no machine cgroups for $infra under $v1 or $v2" >&2; exit 1; }
printf '%-28s %-9s %9s %9s %9s %9s\n' machine role rss_MiB cache_MiB mapped_MiB shmem_MiB
printf '%s\n' "$rows"
printf '%s\n' "$rows" | awk '
  { n[$2]++; rss[$2] += $3; cache[$2] += $4; trss += $3; tcache += $4 }
  END {
    print ""
    printf "%-9s %9s %13s %15s\n", "role", "machines", "mean_rss_MiB", "mean_cache_MiB"
    for (r in n) printf "%-9s %9d %13.0f %15.0f\n", r, n[r], rss[r] / n[r], cache[r] / n[r]
    printf "all machines: rss %.0f MiB, page cache %.0f MiB\n", trss, tcache
  }'
