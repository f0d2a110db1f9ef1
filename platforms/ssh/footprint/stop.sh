# Stops the node on this host and keeps everything kiln put there, the
# cluster's data with it: the host runs on, and so do its own services.
# The units of kiln's that are enabled are named in $rec/stopped, which
# start.sh enables again, and disabled, so that the node stays stopped
# when the host reboots. Then they stop: kubelet, the API proxy and the
# rest first, so that nothing starts a pod again; then the pods, each
# sent SIGTERM and given its stop timeout (etcd among them on a master);
# then the container runtime with its shims; last, anything a shim
# started meanwhile is killed. A stop cut short runs again and keeps the
# first list. Set by kiln before this: rec; and the function kiln_units
# (unitsFn).
set -u
if [ ! -e "$rec/recorded" ]; then
	echo "footprint: $rec has no record: kiln did not install this host" >&2
	exit 1
fi
units=$(kiln_units)
if [ ! -e "$rec/stopped" ]; then
	for u in $units; do
		if [ "$(systemctl is-enabled "$u" 2>/dev/null)" = enabled ]; then
			echo "$u"
		fi
	done >"$rec/stopped.new"
	mv -f "$rec/stopped.new" "$rec/stopped"
fi
if [ -s "$rec/stopped" ]; then
	# shellcheck disable=SC2046 # one word per unit
	systemctl disable --quiet $(cat "$rec/stopped") 2>/dev/null
fi
# shellcheck disable=SC2046 # one word per unit
systemctl stop $(echo "$units" | tr ' ' '\n' | grep -vx containerd.service) 2>/dev/null
systemctl stop kubepods.slice 2>/dev/null
systemctl kill --signal=SIGKILL containerd.service 2>/dev/null
systemctl stop containerd.service 2>/dev/null
# Killed on purpose: whether systemd saw the SIGKILL before the stop job
# (then the unit is "failed") or after (inactive) is a race; a stopped node
# shows no failed unit.
systemctl reset-failed containerd.service 2>/dev/null
systemctl kill --signal=SIGKILL kubepods.slice 2>/dev/null
systemctl stop kubepods.slice 2>/dev/null
echo "footprint: node stopped"
