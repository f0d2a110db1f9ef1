# Sourced by the scripts that run inside the host-test VM (test/host/run.sh):
# the environment kiln runs in there, and `step`, which runs one named step
# and records its result on the host's share (/mnt/host/results).
set -uo pipefail
share=/mnt/host
res=$share/results
mkdir -p "$res"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
# The node image is in the VM's kiln cache, on the root file system as on a
# user's host (test/host/run.sh puts it there).
export KILN_CACHE_DIR=/var/cache/kiln
# kiln and the Terraform engine come from the host; nothing is built here.
install -m 0755 "$share"/bin/* /usr/local/bin/

log() { echo "host-test: $*" | tee -a "$res/steps"; }

# step NAME COMMAND...: runs the command with its output in results/NAME.log
# (and on the console); a failure records "FAIL at NAME", runs diagnose if
# the script defines it, and ends the script, which powers the VM off.
step() {
  run_step "$@" || exit 1
}

# check NAME COMMAND...: a step whose failure is recorded (the run fails at
# the first failed check) but does not end the run: later steps do not
# depend on it.
check() {
  run_step "$@" || true
}

# sample_load: every 60 s until killed, the VM's busiest processes over 5 s
# (top's second frame) into results/load-N.log, so that a slow or failed
# step can be read against what the VM was doing.
sample_load() {
  local i=0
  while sleep 55; do
    i=$((i+1))
    top -b -n 2 -d 5 -w 200 -c | awk '/^top -/ { n++ } n == 2 && ++k <= 30' > "$res/load-$i.log" 2>&1
  done
}

run_step() {
  local name=$1 start end rc secs
  shift
  start=$(date +%s.%N)
  echo "=== step $name: $*" > /dev/console
  "$@" > >(tee "$res/$name.log" > /dev/console) 2>&1
  rc=$?
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  echo "$name $secs" >> "$res/times"
  if [ $rc -ne 0 ]; then
    log "FAIL $name (exit $rc after ${secs} s): $(tail -3 "$res/$name.log" | tr '\n' ' ')"
    [ -f "$res/result" ] || echo "FAIL at $name" > "$res/result"
    # The script's diagnose (host-test.sh), when it has one.
    declare -F diagnose > /dev/null && diagnose
    return 1
  fi
  log "ok $name (${secs} s)"
}

# pass records that every step passed, unless a check failed.
pass() {
  [ -f "$res/result" ] || echo PASS > "$res/result"
}

# machine_init DIR: the pid of the init of the machine whose state
# directory is DIR (systemd-nspawn's child); nothing when it does not run.
machine_init() {
  local nspawn
  nspawn=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$1/machine.json" 2>/dev/null)
  [ -n "$nspawn" ] && pgrep -P "$nspawn" | head -1
}

# running_machines: "NAME INIT_PID" for each machine that runs.
running_machines() {
  local m init
  for m in /var/lib/kiln/machines/*/; do
    init=$(machine_init "$m")
    [ -z "$init" ] || echo "$(basename "$m") $init"
  done
}
