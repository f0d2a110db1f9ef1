#!/usr/bin/env bash
# Per-phase timeline of `kiln create cluster` on the local platform.
#
# Runs `kiln create cluster --dir DIR` (DIR holds an install-config.yaml),
# stamps every line of kiln's progress output with the wall clock, and
# snapshots the bootstrap machine's persistent journal and pod logs every
# 2 s while create runs (create destroys that machine). Once create ends it
# copies every other machine's journal and pod logs, then prints a table of
# events (machine boot, Ignition, image import, containerd/kubelet, etcd,
# API, learners, handover, worker join, install-complete) relative to the
# start of the command, built by test/bench/timeline (a Go program).
# Needs root and a warm node image. The cluster is left running: destroy it
# with `kiln destroy cluster --dir DIR`. Usage:
#   test/bench/timeline.sh DIR            # create, then the table
#   test/bench/timeline.sh -report DIR    # the table again from DIR/timeline
# The raw material stays in DIR/timeline; the table in DIR/timeline/table.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
kiln=${KILN:-bin/kiln}
report_only=
if [ "${1:-}" = -report ]; then report_only=1; shift; fi
dir=${1:?usage: $0 [-report] DIR}
dir=$(cd "$dir" && pwd)
out=$dir/timeline
machines=${KILN_MACHINES_DIR:-/var/lib/kiln/machines}

report() {
  # TIMELINE_ARGS=-images adds a row per imported image.
  # shellcheck disable=SC2086
  go run ./test/bench/timeline -dir "$out" ${TIMELINE_ARGS:-} | tee "$out/table.txt"
}
if [ -n "$report_only" ]; then report; exit 0; fi

[ -x "$kiln" ] || { echo "build kiln first: make build" >&2; exit 2; }
[ -f "$dir/install-config.yaml" ] || { echo "$dir has no install-config.yaml" >&2; exit 2; }
name=$(awk '/^metadata:/ { m=1; next } m && /^  name:/ { print $2; exit }' "$dir/install-config.yaml")
[ -n "$name" ] || { echo "no metadata.name in $dir/install-config.yaml" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/machines"

# snapshot MACHINE_DIR: copy its journal and pod logs to $out/machines/<name>,
# replacing the previous copy only once the new one is complete.
snapshot() {
  local m=$1 base tmp
  base=$(basename "$m")
  tmp=$out/machines/.$base.tmp
  rm -rf "$tmp"
  mkdir -p "$tmp/pods"
  [ -d "$m/upper/var/log/journal" ] && cp -a "$m/upper/var/log/journal" "$tmp/journal" 2>/dev/null
  # Keep the pod logs of earlier snapshots: kubelet removes a container's
  # older logs when it restarts.
  [ -d "$out/machines/$base/pods" ] && cp -a "$out/machines/$base/pods/." "$tmp/pods/" 2>/dev/null
  [ -d "$m/upper/var/log/pods" ] && cp -a "$m/upper/var/log/pods/." "$tmp/pods/" 2>/dev/null
  rm -rf "$out/machines/$base"
  mv "$tmp" "$out/machines/$base"
}

# The bootstrap machine's name is <infraID>-bootstrap, infraID = <name>-<random>.
watch_bootstrap() {
  while :; do
    for m in "$machines/$name"-*-bootstrap; do
      [ -d "$m/upper" ] && snapshot "$m" || true
    done
    sleep 2
  done
}

watch_bootstrap &
watcher=$!
trap 'kill "$watcher" 2>/dev/null || true' EXIT

printf '%s\n' "$EPOCHREALTIME" > "$out/start"
rc=0
"$kiln" create cluster --dir "$dir" 2>&1 |
  while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$out/create.out" || rc=$?
printf '%s\n' "$EPOCHREALTIME" > "$out/end"
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
for m in "$machines/$name"-*; do
  case $m in *-bootstrap) continue ;; esac
  [ -d "$m/upper" ] && snapshot "$m"
done
cp "$dir/.kiln.log" "$out/kiln.log" 2>/dev/null || true
[ "$rc" = 0 ] || echo "kiln create cluster failed (exit $rc); see $out/create.out" >&2
report
exit "$rc"
