#!/bin/sh
# sealed-config.sh FILE: FILE, an install-config.yaml, on standard output
# with networking.egress: None. These machines are offline, and every
# cluster the tests, benchmarks, make conformance and make netpol create
# here is sealed (docs/pod-network.md, "Egress"); a unit test
# (test/e2e/sealed_test.go) checks that they copy the example through this.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 install-config.yaml" >&2; exit 2; }
awk '
  /^networking:/ { print; print "  egress: None"; done = 1; next }
  /^[ \t]+egress:/ && done { next }
  /^platform:/ && !done { print "networking:"; print "  egress: None"; done = 1 }
  { print }
  END { if (!done) { print "networking:"; print "  egress: None" } }
' "$1"
