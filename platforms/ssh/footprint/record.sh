# Records what the host has before kiln changes it, in $rec (RecordDir):
# copies of the paths kiln will write that exist (backup/, listed in
# present), the topmost missing directory of each that does not (absent),
# the interfaces, the firewall (record_firewall), the sysctls, the
# active targets, what /etc/systemd/system holds, and whether
# systemd-sysext.service was enabled. A host recorded already keeps
# its first record (a resumed install). Set by kiln before this: rec, paths
# and sysctls (one per line), units (space-separated); the functions of
# firewall.sh.
set -eu
if [ -e "$rec/recorded" ]; then
	echo "footprint: $rec recorded already"
	exit 0
fi
new="$rec.new"
rm -rf "$new"
umask 077
mkdir -p "$new/backup"
: >"$new/present"
: >"$new/absent"
printf '%s\n' "$paths" >"$new/paths"
while IFS= read -r p; do
	[ -n "$p" ] || continue
	d=$(dirname "$p")
	while [ "$d" != / ]; do
		if [ -L "$d" ]; then
			echo "footprint: $d is a symbolic link; kiln writes $p below it and follows no link" >&2
			exit 1
		fi
		d=$(dirname "$d")
	done
	if [ -e "$p" ] || [ -L "$p" ]; then
		mkdir -p "$new/backup$(dirname "$p")"
		cp -a "$p" "$new/backup$p"
		echo "$p" >>"$new/present"
	else
		top=$p
		d=$(dirname "$p")
		while [ "$d" != / ] && [ ! -e "$d" ]; do
			top=$d
			d=$(dirname "$d")
		done
		echo "$top" >>"$new/absent"
	fi
done <"$new/paths"
sort -u -o "$new/absent" "$new/absent"
ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort >"$new/links"
record_firewall "$new"
printf '%s\n' "$sysctls" >"$new/sysctl-names"
: >"$new/sysctls"
while IFS= read -r s; do
	[ -n "$s" ] || continue
	if v=$(sysctl -n "$s" 2>/dev/null); then
		echo "$s=$v" >>"$new/sysctls"
	fi
done <"$new/sysctl-names"
find /etc/systemd/system -type d | sort >"$new/unit-dirs"
find /etc/systemd/system ! -type d | sort >"$new/unit-files"
systemctl list-units --type=target --state=active --no-legend --plain | awk '{ print $1 }' | sort >"$new/targets"
systemctl is-enabled systemd-sysext.service >"$new/sysext-enabled" 2>/dev/null || true
echo "$units" >"$new/units"
touch "$new/recorded"
mv -T "$new" "$rec"
echo "footprint: recorded $(wc -l <"$rec/present") present and $(wc -l <"$rec/absent") absent paths in $rec"
