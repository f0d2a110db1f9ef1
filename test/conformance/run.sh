#!/usr/bin/env bash
# Runs the upstream Kubernetes conformance suite (e2e.test of the pinned
# release, built offline by `conformance build`, test/conformance/suite)
# against a kiln cluster.
#
#   test/conformance/run.sh [full|subset|netpol|netpol-subset]
#
# full (default) runs every [Conformance] spec; subset runs the short list in
# test/conformance/conformance.go (under 10 minutes); netpol runs every
# upstream NetworkPolicy spec ([Feature:NetworkPolicy], `make netpol`) and
# netpol-subset the short list in test/conformance/netpol.go.
#
# Which cluster, in this order:
#   KUBECONFIG=...   an existing cluster. When CLUSTER_DIR also holds the kiln
#                    cluster behind it, the test images are loaded into its nodes;
#                    otherwise they must be there already (nothing is pulled).
#   CLUSTER_DIR      (default _cluster) a kiln cluster directory; its
#                    auth/kubeconfig is used and the images are loaded with
#                    `kiln load image-archive` (which also pushes them into the
#                    cluster's image registry). With no cluster in it yet, one is
#                    created: 3 masters and 2 workers (at least 2 schedulable nodes).
# Other settings: KILN (default bin/kiln), REPORT_DIR (default
# _conformance/<mode>-<UTC time>), CONFORMANCE_FOCUS and CONFORMANCE_SKIP
# (ginkgo regexps replacing the mode's focus and the default skip, which
# leaves out the specs that cannot pass on kiln's nodes; CONFORMANCE_SKIP= skips none),
# CONFORMANCE_PROCS (default 4): with more than one, the specs not marked
# [Serial] run in that many ginkgo processes, then the [Serial] ones alone.
#
# Prints "conformance: P passed, F failed, S skipped of N" ("netpol: ..." for
# the NetworkPolicy modes) and the report
# directory (JUnit XML and e2e.log); exits 1 when a spec failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-full}
case $mode in
  full | subset) label=conformance ;;
  netpol | netpol-subset) label=netpol ;;
  *) echo "usage: $0 [full|subset|netpol|netpol-subset]" >&2; exit 2 ;;
esac
kiln=${KILN:-bin/kiln}
[ -x "$kiln" ] || { echo "build kiln first: make build" >&2; exit 2; }
cluster_dir=${CLUSTER_DIR:-_cluster}
report_dir=${REPORT_DIR:-_conformance/$mode-$(date -u +%Y%m%dT%H%M%SZ)}
helper() { "${GO:-go}" run ./test/conformance/cmd/conformance "$@"; }

start=$(date +%s)
echo "$label: building e2e.test, kubectl and the test images (cached after the first run)"
eval "$(helper build --env)"
echo "$label: e2e.test $E2E_TEST"

has_cluster() { [ -f "$cluster_dir/metadata.json" ] && [ -f "$cluster_dir/auth/kubeconfig" ]; }
if [ -n "${KUBECONFIG:-}" ]; then
  kubeconfig=$KUBECONFIG
else
  if ! has_cluster; then
    echo "$label: no cluster in $cluster_dir: creating one with 3 masters and 2 workers"
    mkdir -p "$cluster_dir"
    [ -f "$cluster_dir/install-config.yaml" ] || [ -f "$cluster_dir/.kiln_state.json" ] ||
      test/sealed-config.sh docs/examples/install-config-local.yaml |
        sed -e '/^compute:/,/^[a-z]/ s/replicas: 1/replicas: 2/' > "$cluster_dir/install-config.yaml"
    "$kiln" create cluster --dir "$cluster_dir"
  fi
  kubeconfig=$cluster_dir/auth/kubeconfig
fi

if has_cluster; then
  echo "$label: loading $(wc -l < "${IMAGES%.tar}.txt") test images into the nodes of $cluster_dir"
  "$kiln" load image-archive "$IMAGES" --dir "$cluster_dir"
else
  echo "$label: warning: $cluster_dir holds no kiln cluster, so the test images are not loaded;" >&2
  echo "  the nodes must already have every image in ${IMAGES%.tar}.txt (nothing can be pulled)" >&2
fi

focus=${CONFORMANCE_FOCUS:-$(helper focus "$mode")}
# By default the specs that cannot pass on kiln's nodes are skipped (docs/conformance.md).
skip=${CONFORMANCE_SKIP-$(helper skip "$mode")}
procs=${CONFORMANCE_PROCS:-4}
mkdir -p "$report_dir"
# Absolute paths: the ginkgo CLI runs e2e.test in the binary's directory.
report_dir=$(realpath "$report_dir")
kubeconfig=$(realpath "$kubeconfig")
export PATH="$(dirname "$KUBECTL"):$PATH"
e2e_flags=(--provider=local --kubeconfig="$kubeconfig" --kubectl-path="$KUBECTL")
set +e
if [ "$procs" -le 1 ]; then
  echo "$label: running e2e.test ($mode) against $kubeconfig; report in $report_dir"
  "$E2E_TEST" "${e2e_flags[@]}" --report-dir="$report_dir" \
    --ginkgo.focus="$focus" ${skip:+--ginkgo.skip="$skip"} \
    --ginkgo.timeout=24h --ginkgo.no-color > "$report_dir/e2e.log" 2>&1
  rc=$?
else
  # Two passes, as upstream runs the suite: every spec not marked [Serial]
  # in $procs ginkgo processes, then the [Serial] ones alone.
  echo "$label: running e2e.test ($mode, non-[Serial] specs in $procs processes) against $kubeconfig; report in $report_dir"
  mkdir -p "$report_dir/parallel" "$report_dir/serial"
  "$GINKGO" run --procs="$procs" --focus="$focus" --skip='\[Serial\]'"${skip:+|$skip}" \
    --timeout=24h --no-color "$E2E_TEST" -- "${e2e_flags[@]}" --report-dir="$report_dir/parallel" \
    > "$report_dir/e2e.log" 2>&1
  rc=$?
  echo "$label: parallel pass exited $rc after $((($(date +%s) - start) / 60)) min; running the [Serial] specs"
  "$E2E_TEST" "${e2e_flags[@]}" --report-dir="$report_dir/serial" \
    --ginkgo.focus="\[Serial\].*(${focus})|(${focus}).*\[Serial\]" ${skip:+--ginkgo.skip="$skip"} \
    --ginkgo.timeout=24h --ginkgo.no-color > "$report_dir/e2e-serial.log" 2>&1
  rc2=$?
  [ $rc -ne 0 ] || rc=$rc2
fi
set -e
elapsed=$(($(date +%s) - start))
echo "$label: e2e.test exited $rc after $((elapsed / 60))m$((elapsed % 60))s (build, load and run)"
set +e
helper summary "$report_dir" "$focus" "$label"
sum=$?
set -e
echo "$label: report: $report_dir (junit_01.xml, e2e.log)"
if [ $sum -ne 0 ]; then echo "$label: last lines of e2e.log:"; tail -20 "$report_dir/e2e.log"; fi
[ $rc -eq 0 ] && [ $sum -eq 0 ]
