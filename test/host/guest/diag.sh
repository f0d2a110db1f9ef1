# A diagnosis run in the host-test VM (test/host/run.sh
# test/host/guest/diag.sh): host-prep and a 1+1 create as host-test.sh does,
# with a 25 min bootstrap timeout, and every 90 s a snapshot into results/:
# top-N.log (the VM's busiest processes, the load balancers' logs) and
# snap-N-<machine>.log (each machine's failed and starting units, the API
# server's failing readyz checks, its containers and their logs, journal).
. /mnt/host/guest/lib.sh
. /mnt/host/env
dir=/root/cluster
snapshots() {
  local i=0 name init
  while sleep 90; do
    i=$((i+1))
    { date; uptime; ps -eo pid,pcpu,etime,args --sort=-pcpu | head -30 | cut -c1-300; tail -n 30 /var/lib/kiln/lb/*/*.log; } > "$res/top-$i.log" 2>&1
    while read -r name init; do
      nsenter -t "$init" -m -u -i -n -p -- sh -c 'date; uptime; systemctl --failed --no-pager; systemctl list-units --no-pager --state=activating; curl -sk --max-time 20 https://127.0.0.1:6443/readyz?verbose | grep -v "ok\$"; ctr -n k8s.io tasks ls 2>&1 | head -30; ls /var/log/pods/*/*/; tail -n 30 /var/log/pods/*/*/*.log | cut -c1-300; journalctl -n 60 --no-pager -u bootkube -u kubelet -u kiln-netd; journalctl -n 80 --no-pager' < /dev/null > "$res/snap-$i-$name.log" 2>&1
    done < <(running_machines)
    cp "$dir/.kiln.log" "$res/kiln-$i.log" 2>/dev/null
  done
}
# host-test.sh's install_config, host_prep and diagnose (it runs its steps
# when sourced, so only those are taken).
sed -n '/^install_config()/,/^}$/p;/^host_prep()/,/^}$/p;/^diagnose()/,/^}$/p' /mnt/host/guest/host-test.sh > /tmp/host-test-fns.sh
. /tmp/host-test-fns.sh
step host-prep host_prep
snapshots &
install_config vmtest "$dir"
run_step create systemd-run --quiet --wait --pipe --collect --unit=host-test-create \
  --setenv=KILN_CACHE_DIR="$KILN_CACHE_DIR" --setenv=PATH="$PATH" --setenv=HOME=/root \
  kiln create cluster --dir "$dir" --api-timeout 40m --bootstrap-timeout 25m --install-timeout 10m || cp "$dir/.kiln.log" "$res/"
pass
