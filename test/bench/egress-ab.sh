#!/usr/bin/env bash
# A/B create time of networking.egress NAT and None: the same kiln binary
# creates a 1-master cluster of each, alternating, RUNS times, and destroys
# it. Both run inside a simulated world, as the e2e suite's
# TestClusterConnected does: kiln runs in a network namespace ("host") whose
# only route is a veth into another ("world", 198.51.100.0/24), so nothing a
# connected cluster sends can reach the real network.
#
#   test/bench/egress-ab.sh [RUNS]     as root; KILN=bin/kiln by default
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-2}
kiln=$(realpath "${KILN:-bin/kiln}")
world=kiln-bench-world host=kiln-bench-host
cleanup() { ip netns del "$host" 2>/dev/null || true; ip netns del "$world" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add "$world"
ip netns add "$host"
ip -n "$world" link set lo up
ip -n "$host" link set lo up
ip -n "$host" link add kb-up type veth peer name kb-down netns "$world"
ip -n "$world" addr add 198.51.100.1/24 dev kb-down
ip -n "$world" link set kb-down up
ip -n "$host" addr add 198.51.100.2/24 dev kb-up
ip -n "$host" link set kb-up up
ip -n "$host" route add default via 198.51.100.1
in_host() { nsenter --net="/run/netns/$host" -- "$@"; }
for i in $(seq 1 "$runs"); do
  for egress in NAT None; do
    dir=$(mktemp -d /var/tmp/kiln-egress-ab.XXXXXX)
    # The sealed example, 1 master and no worker, with this run's egress
    # (NAT only here, in the world).
    test/sealed-config.sh docs/examples/install-config-local.yaml |
      sed -e 's/replicas: 3/replicas: 1/' -e '/^compute:/,/^[a-z]/ s/replicas: 1/replicas: 0/' \
        -e "s/egress: None/egress: $egress/" -e "s/name: demo/name: egress$i${egress,,}/" > "$dir/install-config.yaml"
    s=$(date +%s.%N)
    rc=0
    in_host "$kiln" create cluster --dir "$dir" --log-level warn > "$dir/create.out" 2>&1 || rc=$?
    e=$(date +%s.%N)
    printf 'run %d, egress %-4s: create %6.1f s (exit %d; kiln: %s)\n' "$i" "$egress" "$(awk -v s="$s" -v e="$e" 'BEGIN { print e - s }')" "$rc" \
      "$(grep -o 'Time elapsed: [0-9a-z.]*' "$dir/create.out" || echo none)"
    in_host "$kiln" destroy cluster --dir "$dir" --log-level warn > "$dir/destroy.out" 2>&1 || { echo "destroy failed: $dir/destroy.out"; exit 1; }
    [ "$rc" = 0 ] || { echo "create failed: $dir/create.out"; exit 1; }
    rm -rf "$dir"
  done
done
