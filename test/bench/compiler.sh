#!/usr/bin/env bash
# The compiler against kubeadm: wall time of `kiln create ignition-configs`
# (every key, cert, kubeconfig, manifest and Ignition config) against
# `kubeadm init phase certs all` + `kubeadm init phase kubeconfig all`, each
# run in a fresh temporary directory, the two commands alternating (A B A B
# ...) so drift of the machine's speed hits both alike. Prints each run, the
# medians and the ratio kubeadm/kiln of the medians and the median of the
# per-pair ratios.
#
# kubeadm is built at the pinned Kubernetes version (assets/release) from the
# Go module proxy the way the node image builds Kubernetes: the wrapper module
# data/components/kubernetes rendered with the pinned versions, kiln's
# component environment (static, -trimpath, -mod=mod, GOTOOLCHAIN=local) and
# its shared build and module caches under ~/.cache/kiln/go, so a warm node
# image cache makes this build mostly cached. The binary is kept in
# ~/.cache/kiln/bench/kubeadm-<version>.
#
# Usage: test/bench/compiler.sh [pairs]   (default 21; KILN=path to kiln,
#        KUBEADM=path to a kubeadm to skip the build; BUILD_ONLY=1 to only build)
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs=${1:-21}
kiln=${KILN:-bin/kiln}
cache=${KILN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln}
release=assets/release/release.go
pinned() { sed -n "s/^\t$1 *= *\"\(.*\)\"$/\1/p" "$release"; }
version=$(pinned KubernetesVersion) staging=$(pinned KubernetesStagingVersion)
[ -n "$version" ] && [ -n "$staging" ] || { echo "no pinned Kubernetes version in $release" >&2; exit 2; }

build_kubeadm() { # $1: output binary
  local src major minor ld p
  src=$(mktemp -d)
  # The node image's wrapper module, rendered as kiln renders it
  # (platforms/local/nodeimage: component.sources).
  sed -e "s/{{.Version}}/$version/g" -e "s/{{.StagingVersion}}/$staging/g" \
    data/components/kubernetes/go.mod.in > "$src/go.mod"
  cp data/components/kubernetes/go.sum.in "$src/go.sum"
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do # kubernetesLDFlags
    ld+=" -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$(dirname "$1")"
  # goEnv in platforms/local/nodeimage/components.go.
  (cd "$src" && env CGO_ENABLED=0 GOOS=linux GOARCH="$(go env GOARCH)" GOFLAGS=-mod=mod GOWORK=off \
    GOTOOLCHAIN=local GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/mod" \
    nice -n 10 go build -trimpath -ldflags "$ld" -o "$1.tmp" k8s.io/kubernetes/cmd/kubeadm)
  mv "$1.tmp" "$1"
  rm -rf "$src"
}

kubeadm=${KUBEADM:-$cache/bench/kubeadm-$version}
if [ ! -x "$kubeadm" ]; then
  echo "building kubeadm $version into $kubeadm" >&2
  start=$(date +%s)
  build_kubeadm "$kubeadm"
  echo "built in $(( $(date +%s) - start ))s" >&2
fi
"$kubeadm" version -o short | grep -qx "$version" || { echo "$kubeadm is not $version" >&2; exit 2; }
[ "${BUILD_ONLY:-}" = 1 ] && exit 0
[ -x "$kiln" ] || { echo "build kiln first: make build" >&2; exit 2; }

# kubeadm's flags: the pinned version (no lookup of the latest release), a
# fixed address and endpoint (no look at the host's interfaces), default
# key type (RSA 2048) as `kubeadm init` would use.
kubeadm_flags=(--kubernetes-version "$version" --apiserver-advertise-address 10.0.0.10
  --control-plane-endpoint api.demo.example.com)
now() { date +%s%N; }
run_kiln() { # $1: fresh directory
  cp docs/examples/install-config-local.yaml "$1/install-config.yaml"
  local t0; t0=$(now)
  "$kiln" create ignition-configs --dir "$1" --log-level warn </dev/null
  echo $(( ($(now) - t0) / 1000 ))
}
run_kubeadm() { # $1: fresh directory
  local t0; t0=$(now)
  "$kubeadm" init phase certs all --cert-dir "$1/pki" "${kubeadm_flags[@]}" >/dev/null
  "$kubeadm" init phase kubeconfig all --cert-dir "$1/pki" --kubeconfig-dir "$1" --node-name master-0 \
    "${kubeadm_flags[@]}" >/dev/null
  echo $(( ($(now) - t0) / 1000 ))
}
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for cmd in run_kiln run_kubeadm; do # warm-up, not counted: page cache, binaries
  d=$(mktemp -d "$work/warm.XXXX"); $cmd "$d" >/dev/null; rm -rf "$d"
done
printf '%-5s %12s %12s %7s\n' pair kiln_ms kubeadm_ms ratio
for i in $(seq 1 "$pairs"); do
  a=$(mktemp -d "$work/kiln.XXXX"); b=$(mktemp -d "$work/kubeadm.XXXX")
  ka=$(run_kiln "$a"); kb=$(run_kubeadm "$b")
  rm -rf "$a" "$b"
  echo "$ka" >> "$work/kiln"; echo "$kb" >> "$work/kubeadm"
  r=$(awk -v a="$ka" -v b="$kb" 'BEGIN {printf "%.2f", b/a}'); echo "$r" >> "$work/ratio"
  awk -v i="$i" -v a="$ka" -v b="$kb" -v r="$r" 'BEGIN {printf "%-5d %12.1f %12.1f %6sx\n", i, a/1000, b/1000, r}'
done
mk=$(median < "$work/kiln") mb=$(median < "$work/kubeadm") mr=$(median < "$work/ratio")
awk -v a="$mk" -v b="$mb" -v r="$mr" -v n="$pairs" 'BEGIN {
  printf "median of %d pairs: kiln %.1f ms, kubeadm %.1f ms: kubeadm/kiln %.1fx (median of the pair ratios %.1fx)\n", n, a/1000, b/1000, b/a, r }'
