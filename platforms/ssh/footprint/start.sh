# Starts the node on this host again: the units stop.sh disabled are
# enabled, and every unit of kiln's that is enabled starts, in one
# transaction, so that the order between them holds (the API proxy and
# the container runtime before kubelet). On a host whose node was not
# stopped it starts what of kiln's is enabled and does not run. The list
# goes last, so a start cut short runs again. Set by kiln before this:
# rec; and the function kiln_units (unitsFn).
set -eu
if [ ! -e "$rec/recorded" ]; then
	echo "footprint: $rec has no record: kiln did not install this host" >&2
	exit 1
fi
if [ -s "$rec/stopped" ]; then
	# shellcheck disable=SC2046 # one word per unit
	systemctl enable --quiet $(cat "$rec/stopped")
fi
start=""
for u in $(kiln_units); do
	if [ "$(systemctl is-enabled "$u" 2>/dev/null)" = enabled ]; then
		start="$start $u"
	fi
done
if [ -n "$start" ]; then
	# shellcheck disable=SC2086 # one word per unit
	systemctl start --no-block $start
fi
rm -f "$rec/stopped"
echo "footprint: node started"
