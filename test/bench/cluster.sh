#!/usr/bin/env bash
# Benchmark of `kiln create cluster` and `kiln destroy cluster` on the local
# platform with a per-phase breakdown (infra, API, bootstrap-complete,
# bootstrap destroy, install-complete, destroy). Needs root and a built node
# image (warm cache) for meaningful numbers. Usage:
#   test/bench/cluster.sh [masters] [workers] [runs]
# With DROP set (even to ""), each run does `kiln create manifests` before
# the timed create and removes DROP's files ("15-network-policy.yaml ...")
# from DIR/manifests, as a user replacing a component would: DROP="" against
# DROP=FILE is the A/B of one component's cost on the same binary.
# Prints one line per run and a summary; record results in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
masters=${1:-3} workers=${2:-1} runs=${3:-1}
kiln=${KILN:-bin/kiln}
[ -x "$kiln" ] || { echo "build kiln first: make build" >&2; exit 2; }

phase_times() { # parse the " ✓ title (12.3s)" lines of kiln's progress output
  awk '/ ✓ / { t=$NF; gsub(/[()]/, "", t); $1=""; $NF=""; sub(/^ +/, ""); sub(/ +$/, ""); printf "  %-75s %s\n", $0, t }' "$1"
}

for run in $(seq 1 "$runs"); do
  dir=$(mktemp -d /tmp/kiln-bench.XXXXXX)
  test/sealed-config.sh docs/examples/install-config-local.yaml |
    sed -e "s/replicas: 3/replicas: $masters/" -e "s/replicas: 1/replicas: $workers/" -e "s/name: demo/name: bench$run/" > "$dir/install-config.yaml"
  if [ -n "${DROP+set}" ]; then
    "$kiln" create manifests --dir "$dir" > "$dir/manifests.out" 2>&1 || { cat "$dir/manifests.out"; exit 1; }
    for f in ${DROP}; do rm "$dir/manifests/$f"; done
  fi
  start=$(date +%s.%N)
  "$kiln" create cluster --dir "$dir" > "$dir/create.out" 2>&1 || { cat "$dir/create.out"; "$kiln" destroy cluster --dir "$dir"; exit 1; }
  created=$(date +%s.%N)
  "$kiln" destroy cluster --dir "$dir" > "$dir/destroy.out" 2>&1 || { cat "$dir/destroy.out"; exit 1; }
  destroyed=$(date +%s.%N)
  echo "run $run: ${masters} masters + ${workers} workers: create $(echo "$created - $start" | bc | xargs printf '%.1f')s, destroy $(echo "$destroyed - $created" | bc | xargs printf '%.1f')s"
  echo " create phases:"; phase_times "$dir/create.out"
  echo " destroy phases:"; phase_times "$dir/destroy.out"
  rm -rf "$dir"
done
