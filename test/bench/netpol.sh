#!/usr/bin/env bash
# Pod-to-pod throughput with and without a NetworkPolicy in the path, on a
# running kiln cluster with a worker. A server pod on the first worker
# answers every GET with SIZE zero bytes (`kiln node probe --serve --size`);
# client pods on the first master (across nodes) and on the same worker
# download it RUNS times each (`kiln node probe --get --download`, which
# times the transfer alone, after retrying for up to a minute until the
# server accepts: a new pod is refused until kube-router has its address,
# and the line says how long that took). Then a default-deny ingress policy plus one
# that allows the clients goes in, so every connection crosses
# kube-router's chains and ipsets, and the same downloads run again.
# Prints each transfer and the median MB/s of each case.
# Usage: test/bench/netpol.sh CLUSTER_DIR [RUNS] [SIZE_BYTES]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: $0 CLUSTER_DIR [RUNS] [SIZE_BYTES]} runs=${2:-5} size=${3:-536870912}
kiln=${KILN:-bin/kiln}
k() { "$kiln" kubectl --dir "$dir" -- "$@"; }
ns=kiln-bench-netpol
. test/bench/lib.sh
infra=$(infra_id "$dir")
master=$infra-master-0 worker=$infra-worker-0
pod() { # NAME NODE ARGS...
  local name=$1 node=$2
  shift 2
  local args=""
  for a in "$@"; do args="$args, \"$a\""; done
  k apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $ns, labels: {app: $name, role: ${name%%-*}}}
spec:
  nodeSelector: {kubernetes.io/hostname: $node}
  tolerations: [{operator: Exists}]
  restartPolicy: Never
  volumes: [{name: kiln, hostPath: {path: /usr/local/bin/kiln}}]
  containers:
  - name: probe
    image: kiln.local/pause:3.10
    imagePullPolicy: Never
    command: [/kiln, node, probe$args]
    volumeMounts: [{name: kiln, mountPath: /kiln, readOnly: true}]
POD
}
k create namespace $ns >/dev/null
trap 'k delete namespace $ns --wait=false >/dev/null' EXIT
pod server-0 "$worker" --serve=:8080 "--size=$size"
k -n $ns wait --for=condition=Ready pod/server-0 --timeout=3m >/dev/null
ip=$(k -n $ns get pod server-0 -o jsonpath='{.status.podIP}')
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
measure() { # CASE: RUNS downloads from each client node
  local case=$1 where node i rates
  for where in cross same; do
    node=$master
    [ $where = same ] && node=$worker
    rates=()
    for i in $(seq "$runs"); do
      pod "client-$where-$case-$i" "$node" "--get=http://$ip:8080/" --download
      k -n $ns wait --for=jsonpath='{.status.phase}'=Succeeded "pod/client-$where-$case-$i" --timeout=3m >/dev/null
      line=$(k -n $ns logs "client-$where-$case-$i")
      echo "$case $where-node run $i: ${line#*: }"
      rates+=("$(echo "$line" | sed 's/.*: \([0-9.]*\) MB\/s.*/\1/')")
    done
    echo "$case $where-node median: $(printf '%s\n' "${rates[@]}" | median) MB/s"
  done
}
measure no-policy
k apply -f - >/dev/null <<POL
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: $ns}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-clients, namespace: $ns}
spec:
  podSelector: {matchLabels: {app: server-0}}
  ingress: [{from: [{podSelector: {matchLabels: {role: client}}}], ports: [{port: 8080, protocol: TCP}]}]
POL
sleep 2
measure policy
