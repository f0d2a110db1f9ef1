#!/usr/bin/env bash
# CPU an idle local kiln cluster uses: the CPU time (user + system, from
# /proc/PID/stat) each program of the cluster spent over SECS, summed per
# program, after waiting SETTLE seconds for the cluster to quiet down. The
# cluster's processes are those in its machines' cgroups (any cgroup path
# naming the infra ID) and its host daemons (load balancers). Prints one line
# per program (CPU seconds, processes, % of one core) and the total. Usage:
#   test/bench/idle-cpu.sh -dir DIR [SECS] [SETTLE]   # defaults 120 and 60
# Needs root (other processes' /proc). Record results in docs/benchmarks.md.
set -euo pipefail
[ "${1:-}" = -dir ] || { echo "usage: $0 -dir DIR [SECS] [SETTLE]" >&2; exit 2; }
dir=${2:?usage: $0 -dir DIR [SECS] [SETTLE]}
secs=${3:-120} settle=${4:-60}
. "$(dirname "$0")/lib.sh"
infra=$(infra_id "$dir")
hz=$(getconf CLK_TCK)

# ticks: "PID TICKS PROGRAM" for every process of the cluster.
ticks() {
  local p pid
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    grep -q "$infra" "$p/cgroup" 2> /dev/null || tr '\0' ' ' < "$p/cmdline" 2> /dev/null | grep -q "/lb/$infra" || continue
    # Fields 14 and 15 of stat, counted after the ")" that ends the
    # program name (which may hold spaces).
    awk -v pid="$pid" -v prog="$(basename "$(tr '\0' '\n' < "$p/cmdline" | head -1)")" \
      '{ sub(/.*\) /, ""); print pid, $12 + $13, (prog == "" ? "[kernel]" : prog) }' "$p/stat" 2> /dev/null
  done
}

sleep "$settle"
before=$(ticks)
sleep "$secs"
after=$(ticks)
# A process that started during the window counts from zero.
awk -v hz="$hz" -v secs="$secs" '
  NR == FNR { start[$1] = $2; next }
  { d = $2 - start[$1]; if (d <= 0) next; t[$3] += d; n[$3]++; all += d }
  END {
    for (k in t) printf "%8.2f s %4d  %5.2f %%  %s\n", t[k] / hz, n[k], 100 * t[k] / hz / secs, k
    printf "%8.2f s        %5.2f %%  total over %d s\n", all / hz, 100 * all / hz / secs, secs
  }' <(echo "$before") <(echo "$after") | sort -rn
