# Takes away everything kiln put on the host, by the record record.sh
# made: stops kiln's units and every pod, unmounts what they mounted,
# unmerges the payload, removes the paths that were absent, restores the
# ones that were present, restarts or stops the NTP client kiln
# configured as it was, deletes the interfaces and routes the cluster
# made, gives the firewall back as it was (reset_firewall), puts the
# sysctls back and stops the targets that were not active. The record goes
# last: a reset cut short runs again. A host whose node kiln stopped is
# reset the same way. Set by kiln before this: rec, route_protocol (the
# node agent's routes), iptables_undo (iptables-undo.awk); the function
# kiln_units (unitsFn) and those of firewall.sh.
set -u
if [ ! -e "$rec/recorded" ]; then
	echo "footprint: no record in $rec: nothing of kiln's on this host"
	exit 0
fi
# What MachineConfigs wrote after install goes first, while the units
# run: the machine-config agent puts back the files the host had and
# removes what it added (a reset is an empty config to it).
if [ -e "$machine_config_state" ]; then
	"$kiln_binary" node machine-config-agent --revert ||
		echo "footprint: taking back what MachineConfigs wrote failed; going on" >&2
fi
units=$(kiln_units)
# The units stop at once (one transaction): no kubelet is left to start a
# pod again. Then the runtime goes, killed whole (its shims stay in
# containerd.service after it stops), before the pods: a container it was
# still creating would otherwise start its `runc init` in a new scope after
# the pods were killed and be left behind. Last the pods are killed, whose
# processes are in kubepods.slice (kubelet's systemd cgroup driver), a
# `runc init` caught mid-start among them; nothing of them is kept.
# shellcheck disable=SC2046 # one word per unit
systemctl stop $(echo "$units" | tr ' ' '\n' | grep -vx containerd.service) 2>/dev/null
systemctl kill --signal=SIGKILL containerd.service 2>/dev/null
systemctl stop containerd.service 2>/dev/null
# runc freezes a container's cgroup while it sets the container up (on
# cgroup v1, with systemd's driver): one it was setting up when it was
# killed stays frozen, and a frozen process takes no signal, SIGKILL
# included (systemd's stop of its scope timed out, "Still around after
# SIGKILL", and its runc init outlived a destroy in TestSSHClusterVXLAN).
# Every frozen cgroup of the pods is thawed before they are killed.
thaw_pods() {
	find /sys/fs/cgroup -path '*kubepods*' \( -name freezer.state -o -name cgroup.freeze \) 2>/dev/null |
		while IFS= read -r f; do
			case "$f" in
			*/freezer.state) [ "$(cat "$f" 2>/dev/null)" = THAWED ] || echo THAWED >"$f" 2>/dev/null ;;
			*) [ "$(cat "$f" 2>/dev/null)" = 0 ] || echo 0 >"$f" 2>/dev/null ;;
			esac
		done
}
thaw_pods
systemctl kill --signal=SIGKILL kubepods.slice 2>/dev/null
systemctl stop kubepods.slice 2>/dev/null
# A container the runtime was creating when it was killed leaves its
# `runc init` orphaned (its parent PID 1), waiting for a start that will
# not come, outside the stopped slice: it goes too. A runtime of the
# host's own keeps its runc init under its monitor, not PID 1. A process
# forked while a kill ran escapes it, and a runc init becomes an orphan
# only once its killed parents are reaped (one was left after a destroy
# in TestSSHCluster): so the runtime and the pods are killed once more,
# and the orphans looked for until two looks in a row find none (at most
# 5 s).
systemctl kill --signal=SIGKILL containerd.service 2>/dev/null
systemctl kill --signal=SIGKILL kubepods.slice 2>/dev/null
orphan_runc_inits() {
	ps -eo pid=,ppid=,args= | awk '$2 == 1 && $3 ~ /(^|\/)runc$/ && $4 == "init" { print $1 }'
}
clean=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
	thaw_pods
	pids=$(orphan_runc_inits)
	if [ -z "$pids" ]; then
		clean=$((clean + 1))
		[ "$clean" -ge 2 ] && break
	else
		clean=0
		for pid in $pids; do
			kill -KILL "$pid" 2>/dev/null
		done
	fi
	sleep 0.5
done
# shellcheck disable=SC2086 # one word per unit
systemctl disable --quiet $units 2>/dev/null
# Every file and link that appeared in /etc/systemd/system (the units,
# their drop-ins, what enabling made), then the directories, once empty.
find /etc/systemd/system ! -type d | sort | comm -13 "$rec/unit-files" - | while IFS= read -r p; do
	rm -f -- "$p"
done
find /etc/systemd/system -mindepth 1 -type d | sort | comm -13 "$rec/unit-dirs" - | sort -r | while IFS= read -r d; do
	rmdir "$d" 2>/dev/null
done
# Unmerged now; a host that used system extensions of its own gets them
# merged again below, once kiln's is gone. One that did not has
# systemd-sysext.service stopped and disabled again (it ran at a boot
# since the install).
systemd-sysext unmerge >/dev/null 2>&1
sysext_before=$(cat "$rec/sysext-enabled")
if [ "$sysext_before" != enabled ]; then
	systemctl disable --now --quiet systemd-sysext.service
fi
# Mounts at or below what kiln made, below what was there (a mount point
# the host had stays), and the pods' network namespaces, deepest first.
findmnt -rn -o TARGET | awk -v absent="$rec/absent" -v present="$rec/present" '
	BEGIN {
		while ((getline p < absent) > 0) at[p] = 1
		while ((getline p < present) > 0) below[p] = 1
	}
	{ for (p in at) if ($0 == p || index($0, p "/") == 1) { print; next } }
	{ for (p in below) if (index($0, p "/") == 1) { print; next } }
	/^\/run\/netns\/cni-/ { print }' | sort -r | while IFS= read -r m; do
	umount -l "$m" || echo "footprint: cannot unmount $m" >&2
done
rm -f /run/netns/cni-*
# Root follows no link: a path below a directory that became a symbolic
# link since the record is left alone, and named.
linked() {
	d=$(dirname "$1")
	while [ "$d" != / ]; do
		if [ -L "$d" ]; then
			echo "footprint: $d is a symbolic link now; $1 is left alone" >&2
			return 0
		fi
		d=$(dirname "$d")
	done
	return 1
}
while IFS= read -r p; do
	linked "$p" || rm -rf -- "$p"
done <"$rec/absent"
if [ "$sysext_before" = enabled ]; then
	systemd-sysext refresh >/dev/null
fi
# A directory that is a mount point keeps its place: its contents are
# replaced.
while IFS= read -r p; do
	if linked "$p"; then
		continue
	elif [ -d "$p" ] && [ ! -L "$p" ] && mountpoint -q "$p"; then
		find "$p" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
		cp -a "$rec/backup$p/." "$p/"
	else
		rm -rf -- "$p"
		cp -a "$rec/backup$p" "$p"
	fi
done <"$rec/present"
# The NTP client kiln gave the time servers (time.sh) reads the host's
# own configuration again, running or stopped as it was.
if [ -s "$rec/time-client" ]; then
	client=$(cat "$rec/time-client")
	if [ "$(cat "$rec/time-active" 2>/dev/null)" = active ]; then
		systemctl restart "$client.service" || echo "footprint: restarting $client.service failed" >&2
	else
		systemctl stop "$client.service" 2>/dev/null
	fi
fi
ip -o -d link show | awk -F': ' '{ sub(/@.*/, "", $2); if ($0 ~ / (veth|bridge|vxlan|dummy) /) print $2 }' |
	sort | comm -13 "$rec/links" - | while IFS= read -r l; do
	ip link delete "$l" 2>/dev/null
done
ip route flush proto "$route_protocol" 2>/dev/null
ip -6 route flush proto "$route_protocol" 2>/dev/null
reset_firewall "$rec"
if [ -e "$rec/sysctls" ]; then
	while IFS= read -r kv; do
		sysctl -q -w "$kv" >/dev/null 2>&1
	done <"$rec/sysctls"
fi
# Targets kiln's units pulled in (network-online.target) stop again.
systemctl list-units --type=target --state=active --no-legend --plain | awk '{ print $1 }' | sort |
	comm -13 "$rec/targets" - | while IFS= read -r u; do
	systemctl stop "$u"
done
systemctl daemon-reload
systemctl reset-failed
rm -rf "$rec"
echo "footprint: host reset"
