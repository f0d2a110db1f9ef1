#!/usr/bin/env bash
# A/B create time of two kiln binaries: `kiln create cluster` of
# docs/examples/install-config-local.yaml (3 masters + 1 worker) with OLD and
# NEW in turn, RUNS times each (OLD, NEW, OLD, NEW, ...), every cluster
# destroyed before the next. Prints one line per run: the wall time of the
# create and kiln's own "Time elapsed". Needs root and a warm node image; the
# first run of a binary also warms its copy for the machines, so quote medians.
# Usage: test/bench/create-ab.sh OLD_KILN NEW_KILN [RUNS]
set -u
cd "$(dirname "$0")/../.."
old=${1:?usage: $0 OLD_KILN NEW_KILN [RUNS]} new=${2:?usage: $0 OLD_KILN NEW_KILN [RUNS]} runs=${3:-3}
work=$(mktemp -d /var/tmp/kiln-create-ab.XXXXXX)
cfg=$work/install-config.yaml
test/sealed-config.sh docs/examples/install-config-local.yaml > "$cfg"
for i in $(seq 1 "$runs"); do
  for v in old new; do
    bin=${!v} dir=$work/$v-$i
    mkdir -p "$dir" && cp "$cfg" "$dir/install-config.yaml"
    s=$(date +%s.%N)
    "$bin" create cluster --dir "$dir" --log-level warn >"$dir/create.out" 2>&1
    rc=$?
    e=$(date +%s.%N)
    printf '%s run %d: exit %d, %.1f s (%s)\n' "$v" "$i" "$rc" "$(awk -v s="$s" -v e="$e" 'BEGIN { print e - s }')" "$(grep 'Time elapsed' "$dir/create.out")"
    "$bin" destroy cluster --dir "$dir" >"$dir/destroy.out" 2>&1 || echo "destroy of $v run $i failed: $dir/destroy.out"
  done
done
echo "logs: $work"
