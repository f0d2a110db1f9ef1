#!/usr/bin/env bash
# The compiler against kubeadm: wall time of `kiln create ignition-configs`
# (every key, cert, kubeconfig, manifest and Ignition config) against
# `kubeadm init phase certs all` + `kubeadm init phase kubeconfig all`, each
# run in a fresh temporary directory, the two commands alternating (A B A B
# ...) so drift of the machine's speed hits both alike. Prints each run, the
# medians and the ratio kubeadm/kiln of the medians and the median of the
# per-round ratios.
#
# kubeadm is built at the pinned Kubernetes version (assets/release) from the
# Go module proxy the way the node image builds Kubernetes: the wrapper module
# data/components/kubernetes rendered with the pinned versions, kiln's
# component environment (static, -trimpath, -mod=mod, GOTOOLCHAIN=local) and
# its shared build and module caches under ~/.cache/kiln/go, so a warm node
# image cache makes this build mostly cached. The binary is kept in
# ~/.cache/kiln/bench/kubeadm-<version>.
#
# Usage: test/bench/compiler.sh [rounds]  (default 21; KILN=path to kiln,
#        KUBEADM=path to a kubeadm to skip the build; BUILD_ONLY=1 to only build;
#        KILN_BASE=path to another kiln, e.g. built from an older commit, to run
#        it in every round too, between the two, for a before/after comparison)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-21}
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
  # (platforms/nodeimage: component.sources).
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
  # goEnv in platforms/nodeimage/components.go.
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
run_kiln() { # $1: fresh directory, $2: the kiln binary (default $kiln)
  test/sealed-config.sh docs/examples/install-config-local.yaml > "$1/install-config.yaml"
  local t0; t0=$(now)
  "${2:-$kiln}" create ignition-configs --dir "$1" --log-level warn </dev/null
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
base=${KILN_BASE:-}
[ -z "$base" ] || [ -x "$base" ] || { echo "KILN_BASE=$base is not executable" >&2; exit 2; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b/a}'; }
printf '%-5s %10s %10s %7s' round kiln_ms kubeadm_ms ratio
[ -z "$base" ] && echo || printf ' %10s %7s %11s\n' base_ms ratio base/kiln
for i in $(seq 1 "$rounds"); do
  d=$(mktemp -d "$work/kiln.XXXX"); ka=$(run_kiln "$d"); rm -rf "$d"
  if [ -n "$base" ]; then
    d=$(mktemp -d "$work/base.XXXX"); kc=$(run_kiln "$d" "$base"); rm -rf "$d"
    echo "$kc" >> "$work/base"
  fi
  d=$(mktemp -d "$work/kubeadm.XXXX"); kb=$(run_kubeadm "$d"); rm -rf "$d"
  echo "$ka" >> "$work/kiln"; echo "$kb" >> "$work/kubeadm"
  r=$(ratio "$ka" "$kb"); echo "$r" >> "$work/ratio"
  awk -v i="$i" -v a="$ka" -v b="$kb" -v r="$r" 'BEGIN {printf "%-5d %10.1f %10.1f %6sx", i, a/1000, b/1000, r}'
  if [ -z "$base" ]; then echo; continue; fi
  rc=$(ratio "$kc" "$kb"); echo "$rc" >> "$work/base-ratio"; rk=$(ratio "$ka" "$kc"); echo "$rk" >> "$work/base-kiln"
  awk -v c="$kc" -v rc="$rc" -v rk="$rk" 'BEGIN {printf " %10.1f %6sx %10sx\n", c/1000, rc, rk}'
done
mk=$(median < "$work/kiln") mb=$(median < "$work/kubeadm") mr=$(median < "$work/ratio")
awk -v a="$mk" -v b="$mb" -v r="$mr" -v n="$rounds" 'BEGIN {
  printf "median of %d rounds: kiln %.1f ms, kubeadm %.1f ms: kubeadm/kiln %.1fx (median of the per-round ratios %.1fx)\n", n, a/1000, b/1000, b/a, r }'
if [ -n "$base" ]; then
  mc=$(median < "$work/base") mrc=$(median < "$work/base-ratio") mrk=$(median < "$work/base-kiln")
  awk -v c="$mc" -v b="$mb" -v rc="$mrc" -v rk="$mrk" 'BEGIN {
    printf "KILN_BASE: median %.1f ms: kubeadm/base %.1fx (per-round %.1fx); base/kiln per-round median %.2fx\n", c/1000, b/c, rc, rk }'
fi
