# Keeps the host's clock in step with the time servers kiln was given
# (platform.ssh.ntpServers): the host's NTP client (time_client, the
# first of chrony and systemd-timesyncd it has) gets them in a file of
# kiln's (chrony_file, a source of chrony's /etc/chrony/sources.d, or
# timesyncd_file, a timesyncd.conf drop-in), is enabled and restarted,
# and the script waits until the client says the clock is synchronised
# (at most wait seconds). The record, which must exist, says first which
# client kiln changed and whether it was running (time-client,
# time-active): the reset restores the files and starts or stops the
# client as it was; enabling it made a link that the reset removes with
# the rest of what appeared in /etc/systemd/system. Set by kiln before
# this: rec, servers (space-separated), chrony_file, timesyncd_file,
# timesyncd_flag, wait, time_clients (space-separated, in order of preference); the
# function put_file (putFileFn).
set -eu
if [ ! -e "$rec/recorded" ]; then
	echo "footprint: $rec has no record: kiln records a host before it changes it" >&2
	exit 1
fi
client=
for c in $time_clients; do
	if systemctl cat "$c.service" >/dev/null 2>&1; then
		client=$c
		break
	fi
done
if [ -z "$client" ]; then
	echo "time: none of $time_clients is installed; kiln configures one of them for platform.ssh.ntpServers (apt-get install chrony)" >&2
	exit 1
fi
if [ ! -e "$rec/time-client" ]; then
	systemctl is-active "$client.service" >"$rec/time-active.new" 2>/dev/null || true
	mv -f "$rec/time-active.new" "$rec/time-active"
	echo "$client" >"$rec/time-client"
fi
text=
case $client in
chrony*)
	file=$chrony_file
	for s in $servers; do
		text="${text}server $s iburst prefer
"
	done
	;;
*)
	file=$timesyncd_file
	text="[Time]
NTP=
NTP=$servers
"
	;;
esac
mkdir -p "$(dirname "$file")"
put_file "$file" 0644 "$text"
# timesyncd writes its flag file after every answer it accepts: one left
# from before is not an answer from these servers (it is runtime state,
# on /run).
flag=$timesyncd_flag
rm -f "$flag"
systemctl enable --quiet "$client.service" 2>/dev/null || true
systemctl restart "$client.service"
# synchronised: chrony has chosen a source other than its own clock and
# its leap status is known; timesyncd has written its flag file again.
synchronised() {
	case $client in
	chrony*)
		chronyc -n -c tracking 2>/dev/null | awk -F, '$1 != "00000000" && $1 != "7F7F0101" && $NF != "Not synchronised" { ok = 1 } END { exit !ok }'
		;;
	*)
		[ -e "$flag" ]
		;;
	esac
}
i=0
while ! synchronised; do
	if ! systemctl is-active --quiet "$client.service"; then
		echo "time: $client.service does not run:" >&2
		systemctl status --no-pager --lines=5 "$client.service" >&2 || true
		exit 1
	fi
	i=$((i + 1))
	if [ "$i" -gt "$wait" ]; then
		echo "time: $client did not synchronise the clock with $servers in ${wait}s:" >&2
		case $client in
		chrony*) chronyc -n sources >&2 || true ;;
		*) timedatectl timesync-status --no-pager >&2 || true ;;
		esac
		exit 1
	fi
	sleep 1
done
echo "time: $client synchronised with $servers after ${i}s"
