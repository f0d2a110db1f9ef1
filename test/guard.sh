#!/usr/bin/env bash
# The stray-packet guard: while it runs, no packet from or to a cluster, pod,
# service or test network may cross this host's default-route interface(s).
#
#   test/guard.sh start   install the guard (an nftables table of its own)
#   test/guard.sh check   print what it counted; exit 1 if it counted any packet
#   test/guard.sh stop    remove it (check first: the count goes with it)
#   test/guard.sh run CMD [ARG...]
#                         start, run CMD, check, stop: exits with CMD's status,
#                         or 1 when CMD passed and the guard counted a packet
#
# The table drops and counts, on every interface that holds a default route
# when the guard starts (IPv4 and IPv6):
#   - the host's own output and forwarded traffic leaving through one of them
#     to or from an address of the guarded networks;
#   - traffic arriving through one of them from or to such an address.
# Each such packet's far address, protocol and port go into a dynamic set,
# so `check` names the first destinations, not only a count.
#
# The guarded networks ($nets): every block kiln's clusters and the
# end-to-end tests use on these machines - the machine networks 10.66.0.0/16,
# the test hosts' segments 10.200.0.0 - 10.249.255.255 (freeSubnet in
# test/e2e), the default pod network 10.128.0.0/14 and service network
# 172.30.0.0/16, and the documentation ranges the simulated outside is built
# from (198.51.100.0/24, 203.0.113.0/24). 192.0.2.0/24 is not guarded: these
# machines' own uplink may use it. 203.0.113.0/24 is guarded as a source
# only (a packet of the simulated outside that got out): these machines'
# package registries answer at an address in it, which the host's own
# traffic reaches through its default route. KILN_GUARD_EXTRA adds blocks
# (a comma-separated nftables list), for a cluster of other networks.
#
# KILN_GUARD_TABLE names the table (default kiln_guard), so two runs at once
# keep their own counts: the end-to-end suite uses kiln_guard_e2e_<pid>, and
# `start` removes any such table whose process is gone (a killed run's).
# Needs root and nft (Debian's nftables). `make conformance` and `make netpol`
# run under it with KILN_GUARD=1 (docs/security.md, "Addresses kiln dials").
set -euo pipefail

table=${KILN_GUARD_TABLE:-kiln_guard}
nets="10.66.0.0/16, 10.128.0.0/14, 10.200.0.0-10.249.255.255, 172.30.0.0/16, 198.51.100.0/24${KILN_GUARD_EXTRA:+, $KILN_GUARD_EXTRA}"
sources="$nets, 203.0.113.0/24"

die() { echo "guard: $*" >&2; exit 2; }

# uplinks prints the interfaces holding a default route, as an nftables set.
uplinks() {
  { ip -o -4 route show default; ip -o -6 route show default; } 2>/dev/null |
    sed -n 's/.* dev \([^ ]*\).*/"\1"/p' | sort -u | paste -sd, -
}

# reap removes the tables of end-to-end runs whose process is gone.
reap() {
  local t pid
  for t in $(nft list tables inet 2>/dev/null | sed -n 's/^table inet \(kiln_guard_e2e_[0-9]*\)$/\1/p'); do
    pid=${t##*_}
    [ -d "/proc/$pid" ] || nft delete table inet "$t"
  done
}

start() {
  local ifs
  ifs=$(uplinks)
  reap
  nft list table inet "$table" >/dev/null 2>&1 && nft delete table inet "$table"
  if [ -z "$ifs" ]; then
    echo "guard: no default route on this host: nothing can leave it; table $table counts nothing"
    ifs='"kiln-guard-none"'
  fi
  nft -f - <<EOF
table inet $table {
  counter leaked { }
  set nets { type ipv4_addr; flags interval; elements = { $nets } }
  set sources { type ipv4_addr; flags interval; elements = { $sources } }
  set leaks { type ipv4_addr . inet_proto . inet_service; size 4096; flags dynamic, timeout; timeout 1d; }
  chain output {
    type filter hook output priority filter - 10; policy accept;
    oifname { $ifs } ip saddr @sources add @leaks { ip daddr . meta l4proto . th dport } counter name "leaked" drop
    oifname { $ifs } ip daddr @nets add @leaks { ip daddr . meta l4proto . th dport } counter name "leaked" drop
  }
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    oifname { $ifs } ip saddr @sources add @leaks { ip daddr . meta l4proto . th dport } counter name "leaked" drop
    oifname { $ifs } ip daddr @nets add @leaks { ip daddr . meta l4proto . th dport } counter name "leaked" drop
  }
  chain prerouting {
    type filter hook prerouting priority raw - 10; policy accept;
    iifname { $ifs } ip daddr @sources add @leaks { ip saddr . meta l4proto . th sport } counter name "leaked" drop
    iifname { $ifs } ip saddr @nets add @leaks { ip saddr . meta l4proto . th sport } counter name "leaked" drop
  }
}
EOF
  echo "guard: table inet $table drops and counts packets from or to { $nets } on { $ifs }, and from { 203.0.113.0/24 }"
}

check() {
  nft list table inet "$table" >/dev/null 2>&1 || die "no table inet $table: run $0 start first"
  local n
  n=$(nft list counter inet "$table" leaked | sed -n 's/.*packets \([0-9]*\).*/\1/p')
  if [ "${n:-0}" = 0 ]; then
    echo "guard: 0 packets from or to the guarded networks crossed the default-route interface(s)"
    return 0
  fi
  echo "guard: $n packet(s) from or to the guarded networks crossed the default-route interface(s) (dropped); far address . protocol . port:"
  nft list set inet "$table" leaks | tr -d '\n' | sed -n 's/.*elements = { \(.*\) }.*/\1/p' | tr ',' '\n' |
    sed 's/ expires.*//; s/ timeout.*//; s/^ */  /' | head -20
  echo
  return 1
}

stop() {
  nft list table inet "$table" >/dev/null 2>&1 || return 0
  nft delete table inet "$table"
  echo "guard: table inet $table removed"
}

[ "$(id -u)" = 0 ] || die "needs root (nftables)"
command -v nft >/dev/null || die "nft missing: apt-get install nftables"
# run runs "$@" under the guard.
run() {
  [ $# -gt 0 ] || die "run: no command"
  start
  trap stop EXIT
  local rc=0
  "$@" || rc=$?
  check || { [ $rc != 0 ] || rc=1; }
  return $rc
}

case ${1:-} in
  start) start ;;
  check) check ;;
  stop) stop ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 start|check|stop|run CMD [ARG...]" >&2; exit 2 ;;
esac
