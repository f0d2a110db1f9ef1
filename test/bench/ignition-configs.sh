#!/usr/bin/env bash
# Wall time and peak RSS of `kiln create ignition-configs` from a fixed
# install-config (docs/examples/install-config-local.yaml), in a fresh --dir
# each run. Usage: test/bench/ignition-configs.sh [runs]  (needs /usr/bin/time)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
kiln=${KILN:-bin/kiln}
[ -x "$kiln" ] || { echo "build kiln first: make build" >&2; exit 2; }
for run in $(seq 1 "$runs"); do
  dir=$(mktemp -d)
  test/sealed-config.sh docs/examples/install-config-local.yaml > "$dir/install-config.yaml"
  /usr/bin/time -f "run $run: wall %es, peak RSS %M KiB" "$kiln" create ignition-configs --dir "$dir" --log-level warn </dev/null
  rm -rf "$dir"
done
